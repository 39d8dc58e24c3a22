"""pyarrow is the `arrow` extra: a store, broker, name server or client runs without it, and a
feature that needs it fails with one line naming the extra."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_python

BLOCK_PYARROW = "import sys\nsys.modules['pyarrow'] = None   # as if it were not installed\n"


def test_store_broker_client_and_namesrv_run_without_pyarrow(tmp_path: Path) -> None:
    result = run_python(BLOCK_PYARROW + f"""
import json
import rocketstore.broker.startup, rocketstore.namesrv, rocketstore.client
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.store import StoreReader
from rocketstore.common.optional import MissingExtraError

with MessageStore.open({str(tmp_path / 'store')!r}, StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
    put = store.put_message(Message("t", b"hello"), queue_id=0)
    store.wait_dispatched()
    got = store.get_message("g", "t", 0, 0, 10)
    aligned = store.align_to_record(1)
    try:
        store.read_range_table(0)
        error = None
    except MissingExtraError as exc:
        error = str(exc)
print(json.dumps({{"status": put.status.name, "bodies": [bytes(m.body).decode() for m in got.messages],
                   "aligned": aligned, "error": error, "arrow": "pyarrow" in sys.modules and sys.modules["pyarrow"] is not None}}))
""")
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["status"] == "PUT_OK" and out["bodies"] == ["hello"]
    assert out["aligned"] > 0 and out["arrow"] is False
    assert out["error"] == ("columnar reads (read_range, export, Spark) need pyarrow, which is not "
                            "installed: pip install 'rocketstore[arrow]'")


def test_store_face_names_the_extra_for_columnar_names() -> None:
    result = run_python(BLOCK_PYARROW + """
try:
    from rocketstore.store import read_range
except ImportError as exc:
    print(type(exc).__name__, exc)
""")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("MissingExtraError ") and "rocketstore[arrow]" in result.stdout


def test_cli_export_without_pyarrow_is_one_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = run_python(BLOCK_PYARROW + f"""
from rocketstore import Message, MessageStore, StoreConfig
with MessageStore.open({str(store)!r}, StoreConfig(mapped_file_size_commit_log=1 << 20)) as s:
    s.put_message(Message("t", b"x"), queue_id=0)
from rocketstore.cli import main
main(["export", {str(store)!r}, {str(tmp_path / 'out')!r}], prog_name="rocketstore")
""")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["Error: Parquet exports need pyarrow, which is not installed: "
                     "pip install 'rocketstore[arrow]'"] or lines == [
        "Error: columnar reads (read_range, export, Spark) need pyarrow, which is not installed: "
        "pip install 'rocketstore[arrow]'"], lines
