"""Parquet export of sealed CommitLog segments: equal to the columnar decode,
one file per sealed segment, idempotent, resumable (also after SIGKILL), pyarrow only."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import rocketstore
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.export.parquet import MANIFEST, export_parquet, sealed_segments
from rocketstore.store import columnar

SEG = 64 * 1024


def _config(root: Path) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEG,
                       mapped_file_size_consume_queue=20 * 200, store_host="10.1.2.3:10911")


def _fill(store: MessageStore, n: int, seed: int) -> None:
    rng = random.Random(seed)
    for start in range(0, n, 100):
        msgs = [Message(rng.choice(["orders", "audit", "clicks"]),
                        bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 500))),
                        tags=rng.choice([None, "a", "b"]),
                        keys=rng.choice([None, [f"k{start}"], ["x", "y"]]),
                        properties={"i": str(start)} if rng.random() < 0.3 else None)
                for _ in range(min(100, n - start))]
        store.put_messages(msgs, [rng.randrange(4) for _ in msgs])


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    with MessageStore.open(root, _config(root)) as store:
        _fill(store, 2500, 7)
        assert len(store.commit_log.queue.files) >= 8
    return root


def _open(root: Path) -> MessageStore:
    return MessageStore.open(root, _config(root), read_only=True)


def test_export_equals_columnar_decode(store_dir, tmp_path):
    out = tmp_path / "out"
    seen = []
    with _open(store_dir) as store:
        report = export_parquet(store, out, progress=lambda done, total: seen.append(
            (done, total)))
        sealed, unsealed = sealed_segments(store)
        newest = store.commit_log.queue.files[-1]
        assert len(unsealed) == 1 and unsealed[0].start_offset == newest.file_from_offset
        assert [s.name for s in report.exported] == [s.name for s in sealed]
        assert report.pending == [os.path.basename(newest.file_name)]
        assert seen and seen[-1][0] == seen[-1][1] == \
            sum(s.end_offset - s.start_offset for s in sealed)
        for segment, seg in zip(sealed, report.exported, strict=True):
            table = pq.read_table(out / seg.file)
            want = store.read_range_table(segment.start_offset, segment.end_offset, spark=True)
            assert table.schema.equals(columnar.schema(True, spark=True))
            assert table.num_rows == seg.rows == want.num_rows > 0
            assert table.equals(want)
        everything = pq.read_table(out)           # the directory reads as one dataset
        last = unsealed[0].start_offset
        want = store.read_range_table(store.get_min_phy_offset(), last, spark=True)
        assert everything.num_rows == want.num_rows
        assert sorted(everything.column("commitlog_offset").to_pylist()) == \
            want.column("commitlog_offset").to_pylist()
    manifest = json.loads((out / MANIFEST).read_text())
    assert set(manifest["segments"]) == {s.name for s in report.exported}
    assert not [p for p in os.listdir(out) if p.endswith(".tmp")]


def test_export_is_idempotent_and_picks_up_new_segments(store_dir, tmp_path):
    out = tmp_path / "out"
    with _open(store_dir) as store:
        first = export_parquet(store, out, progress=None)
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")}
    with _open(store_dir) as store:
        again = export_parquet(store, out, progress=None)
    assert again.exported == [] and again.skipped == [s.name for s in first.exported]
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")} == stamps
    with MessageStore.open(store_dir, _config(store_dir)) as store:     # seal more segments
        _fill(store, 1500, 8)
    with _open(store_dir) as store:
        more = export_parquet(store, out, progress=None)
        sealed, _ = sealed_segments(store)
    assert more.skipped == again.skipped
    assert more.exported and [s.name for s in first.exported + more.exported] == \
        [s.name for s in sealed]
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")
            if p.name in stamps} == stamps


def test_export_resumes_after_partial_runs(store_dir, tmp_path):
    out = tmp_path / "out"
    with _open(store_dir) as store:
        part = export_parquet(store, out, progress=None, max_segments=3, workers=1)
        assert len(part.exported) == 3
        # leftovers of a killed run: a temp file, and a file the manifest never recorded
        (out / ".00000000000000999999.parquet.tmp").write_bytes(b"half")
        manifest = json.loads((out / MANIFEST).read_text())
        dropped = part.exported[-1].name
        del manifest["segments"][dropped]
        (out / MANIFEST).write_text(json.dumps(manifest))
        rest = export_parquet(store, out, progress=None)
        sealed, _ = sealed_segments(store)
    assert rest.skipped == [s.name for s in part.exported[:2]]
    assert [s.name for s in rest.exported][0] == dropped
    assert not list(out.glob(".*.tmp"))
    assert sorted(p.stem for p in out.glob("*.parquet")) == \
        [s.name for s in sealed]


def test_export_resumes_after_sigkill(store_dir, tmp_path):
    """A process killed (SIGKILL) in the middle of the export leaves no partial Parquet file
    behind; the next run finishes the job and the result equals a clean export."""
    out, clean = tmp_path / "out", tmp_path / "clean"
    code = textwrap.dedent(f"""
        import os, signal
        from rocketstore import MessageStore, StoreConfig
        from rocketstore.export.parquet import export_parquet
        root = {str(store_dir)!r}
        cfg = StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log={SEG},
                          mapped_file_size_consume_queue=4000, store_host="10.1.2.3:10911")
        store = MessageStore.open(root, cfg, read_only=True)
        def progress(done, total):
            if done > total // 2:
                os.kill(os.getpid(), signal.SIGKILL)
        export_parquet(store, {str(out)!r}, progress=progress, workers=1, batch_bytes=4096)
    """)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(rocketstore.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    done_before = json.loads((out / MANIFEST).read_text())["segments"]
    assert done_before                               # some segments were finished
    with _open(store_dir) as store:
        resumed = export_parquet(store, out, progress=None)
        export_parquet(store, clean, progress=None)
    assert sorted(resumed.skipped) == sorted(done_before)
    assert resumed.exported
    assert sorted(p.name for p in out.glob("*.parquet")) == \
        sorted(p.name for p in clean.glob("*.parquet"))
    for p in clean.glob("*.parquet"):
        assert pq.read_table(p).equals(pq.read_table(out / p.name))
    assert not list(out.glob(".*"))


def test_export_without_body_and_mismatch(store_dir, tmp_path):
    out = tmp_path / "out"
    with _open(store_dir) as store:
        export_parquet(store, out, include_body=False, progress=None, max_segments=1)
        table = pq.read_table(next(out.glob("*.parquet")))
        assert "body" not in table.column_names
        assert table.schema.equals(columnar.schema(False, spark=True))
        with pytest.raises(ValueError, match="include_body=False"):
            export_parquet(store, out, include_body=True, progress=None)


def test_export_of_a_store_with_one_segment_exports_nothing(tmp_path):
    root = tmp_path / "small"
    with MessageStore.open(root, _config(root)) as store:
        store.put_message(Message("t", b"x"), 0)
    with _open(root) as store:
        report = export_parquet(store, tmp_path / "out", progress=None)
    assert report.exported == [] and len(report.pending) == 1


def test_include_active_exports_everything_and_again_once_the_segment_grows(store_dir, tmp_path):
    out = tmp_path / "out"
    with _open(store_dir) as store:
        report = export_parquet(store, out, progress=None, include_active=True)
        end = store.get_max_phy_offset()
        everything = store.read_range_table(store.get_min_phy_offset(), end, spark=True)
    assert report.pending == [] and report.pending_bytes == 0
    assert pq.read_table(out).num_rows == everything.num_rows
    active = report.exported[-1]
    assert active.end_offset == end
    assert json.loads((out / MANIFEST).read_text())["segments"][active.name]["sealed"] is False
    with MessageStore.open(store_dir, _config(store_dir)) as store:       # the segment grows
        store.put_message(Message("orders", b"late"), 0)
    with _open(store_dir) as store:
        again = export_parquet(store, out, progress=None, include_active=True)
        total = store.read_range_table(store.get_min_phy_offset(), store.get_max_phy_offset(),
                                       spark=True).num_rows
    assert active.name in [s.name for s in again.exported]          # replaced, not skipped
    assert pq.read_table(out).num_rows == total == everything.num_rows + 1


def test_cli_says_what_the_active_segment_holds_and_how_to_export_it(store_dir, tmp_path):
    from helpers import cli_run

    result = cli_run("export", store_dir, tmp_path / "out", "--no-progress")
    assert result.exit_code == 0, result.output
    assert "left out: the segment being written (" in result.output
    assert "--include-active exports it too" in result.output
    result = cli_run("export", store_dir, tmp_path / "out2", "--no-progress", "--include-active")
    assert result.exit_code == 0 and "left out" not in result.output
    with _open(store_dir) as store:
        total = store.read_range_table(store.get_min_phy_offset(), store.get_max_phy_offset()).num_rows
    assert pq.read_table(tmp_path / "out2").num_rows == total
