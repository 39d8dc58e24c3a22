"""The console's pages: one handler per URL, each gathering what it shows from the admin
client and rendering its template."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote_plus

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from rocketstore.client import Message, MessageQueue, MQBrokerError, MQClientError
from rocketstore.common.perm import PERM_READ, PERM_WRITE
from rocketstore.common.properties import MessageConst
from rocketstore.common.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    OFFSET_MOVED_EVENT,
    SELF_TEST_TOPIC,
    SYSTEM_GROUPS,
    TRANS_CHECK_MAX_TIME_TOPIC,
    is_dlq_topic,
    is_system_topic,
    retry_topic,
    validate_topic,
)
from rocketstore.console.history import History
from rocketstore.console.messages import (
    consumption_trace,
    default_range,
    message_detail,
    message_row,
    parse_time,
    search_time_range,
)
from rocketstore.remoting import ResponseCode

if TYPE_CHECKING:
    from starlette.templating import Jinja2Templates

    from rocketstore.client import AsyncAdmin
    from rocketstore.console.app import ConsoleState

#: topics every broker makes for itself (beside one named for its cluster and one for itself),
#: listed only with the system topics (as the broker's GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
BROKER_TOPICS = frozenset((AUTO_CREATE_TOPIC_KEY_TOPIC, BENCHMARK_TOPIC, OFFSET_MOVED_EVENT, SELF_TEST_TOPIC,
                           TRANS_CHECK_MAX_TIME_TOPIC))
#: rows per page of the topic and group lists
PAGE_SIZE = 50
#: DLQ messages shown per queue (the latest)
DLQ_PAGE = 50
#: properties a resend does not carry over: the broker's bookkeeping of the earlier sends
_RESEND_DROPPED = frozenset((MessageConst.DELAY_TIME_LEVEL, MessageConst.REAL_TOPIC,
                             MessageConst.REAL_QUEUE_ID, MessageConst.TRANSACTION_PREPARED,
                             MessageConst.MIN_OFFSET, MessageConst.MAX_OFFSET))


def state_of(request: Request) -> ConsoleState:
    console: ConsoleState = request.app.state.console
    return console


def render(request: Request, template: str, active: str, **context: Any) -> HTMLResponse:
    templates: Jinja2Templates = request.app.state.templates
    context.setdefault("notice", request.query_params.get("notice", ""))
    account = getattr(request.state, "account", None)
    context.setdefault("user", account.access_key if account is not None else "")
    response: HTMLResponse = templates.TemplateResponse(request, template, {"active": active, **context})
    return response


async def form_of(request: Request) -> dict[str, str]:
    """An application/x-www-form-urlencoded body, one value per field."""
    body = (await request.body()).decode("utf-8", "replace")
    return {name: values[-1] for name, values in parse_qs(body, keep_blank_values=True).items()}


def int_field(fields: Any, name: str, default: int | None = None, *, low: int | None = None,
              high: int | None = None) -> int:
    """An integer form or query field; ValueError names it."""
    text = (fields.get(name) or "").strip()
    if not text:
        if default is None:
            raise ValueError(f"{name} is required")
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {text[:40]!r}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def first_figure(text: str) -> float:
    """A runtime-info TPS value's first figure (its 10 s rate)."""
    try:
        return float(text.split(" ", 1)[0])
    except (ValueError, AttributeError):
        return 0.0


def redirect(url: str, notice: str = "") -> RedirectResponse:
    if notice:
        url += ("&" if "?" in url else "?") + "notice=" + quote_plus(notice)
    return RedirectResponse(url, status_code=303)


# ---- sampling for the charts ----

async def broker_rows(admin: AsyncAdmin) -> list[dict[str, Any]]:
    """One row per broker of every cluster, with its runtime figures."""
    info = await admin.cluster_info()
    places = [(cluster, name, broker_id, address)
              for cluster, names in sorted(info["clusterAddrTable"].items()) for name in names
              for broker_id, address in sorted(info["brokerAddrTable"].get(name, {}).get("brokerAddrs", {}).items())]

    async def status(address: str) -> dict[str, str]:
        try:
            return await admin.broker_status(address)
        except (MQClientError, MQBrokerError, OSError, TimeoutError) as exc:
            return {"error": str(exc)}

    statuses = await asyncio.gather(*(status(p[3]) for p in places))
    rows = []
    for (cluster, name, broker_id, address), runtime in zip(places, statuses, strict=True):
        rows.append({"cluster": cluster, "brokerName": name, "brokerId": broker_id, "address": address,
                     "role": "MASTER" if broker_id == 0 else "SLAVE", "runtime": runtime,
                     "putTps": first_figure(runtime.get("putTps", "")),
                     "getTps": first_figure(runtime.get("getTransferedTps", "")),
                     "error": runtime.get("error", ""), "replication": ""})
    # a slave's replication lag: how far its CommitLog is behind its master's
    masters = {r["brokerName"]: r for r in rows if r["brokerId"] == 0 and not r["error"]}
    for row in rows:
        master = masters.get(row["brokerName"])
        if row["brokerId"] != 0 and master is not None and not row["error"]:
            behind = int(master["runtime"].get("commitLogMaxOffset", 0)) - int(row["runtime"].get("commitLogMaxOffset", 0))
            row["replication"] = f"{max(behind, 0):,} bytes behind"
        elif row["brokerId"] == 0:
            slaves = sum(1 for r in rows if r["brokerName"] == row["brokerName"] and r["brokerId"] != 0)
            row["replication"] = f"{slaves} slave(s)" if slaves else "no slave"
    return rows


async def sample(history: History, admin: AsyncAdmin) -> None:
    """One sample of every broker's TPS and every watched group's lag."""
    now = time.time()
    for row in await broker_rows(admin):
        if not row["error"]:
            history.add(f"put:{row['address']}", row["putTps"], now)
            history.add(f"get:{row['address']}", row["getTps"], now)
    for group in history.groups_to_sample():
        try:
            progress = await admin.consumer_progress(group)
        except (MQClientError, MQBrokerError, OSError, TimeoutError):
            continue
        history.add(f"lag:{group}", progress["diffTotal"], now)


# ---- pages ----

async def cluster(request: Request) -> Response:
    state = state_of(request)
    rows = await broker_rows(await state.admin_of(request))
    charts = [(f"{r['brokerName']} ({r['address']}) put TPS", state.history.points(f"put:{r['address']}"))
              for r in rows] + [(f"{r['brokerName']} ({r['address']}) get TPS",
                                 state.history.points(f"get:{r['address']}")) for r in rows]
    return render(request, "cluster.jinja", "cluster", rows=rows, charts=charts,
                  namesrv=state.settings.namesrv_addr)


def _page(request: Request, names: list[str]) -> tuple[list[str], int, int]:
    pages = max(1, -(-len(names) // PAGE_SIZE))
    page = int_field(request.query_params, "page", 1, low=1, high=pages)
    return names[(page - 1) * PAGE_SIZE:page * PAGE_SIZE], page, pages


async def _topic_summaries(admin: AsyncAdmin, names: list[str]) -> list[dict[str, Any]]:
    """Queues, messages and last store time of each topic, from the masters holding it: one
    GET_ALL_TOPIC_CONFIG per master says which, then one GET_TOPIC_STATS_INFO per topic and
    master, all at once."""
    masters = list((await admin.masters()).items())
    configs = await asyncio.gather(*(admin.topic_configs(address) for _, address in masters))

    async def one(topic: str) -> dict[str, Any]:
        holders = [(name, address) for (name, address), table in zip(masters, configs, strict=True) if topic in table]
        if not holders:
            return {"topic": topic, "error": "no master broker holds it", "queues": 0, "messages": 0}
        try:
            status = [row for _, address in holders for row in await admin.topic_stats(address, topic)]
        except (MQClientError, MQBrokerError, OSError, TimeoutError) as exc:
            return {"topic": topic, "error": str(exc), "queues": 0, "messages": 0}
        return {"topic": topic, "error": "", "queues": len(status), "brokers": [name for name, _ in holders],
                "messages": sum(r["maxOffset"] - r["minOffset"] for r in status),
                "maxOffset": sum(r["maxOffset"] for r in status),
                "lastUpdate": max((r["lastUpdateTimestamp"] for r in status), default=0)}

    return list(await asyncio.gather(*(one(topic) for topic in names)))


async def topics(request: Request) -> Response:
    state = state_of(request)
    admin = await state.admin_of(request)
    if request.method == "POST":
        form = await form_of(request)
        topic = validate_topic((form.get("topic") or "").strip())
        perm = int_field(form, "perm", PERM_READ | PERM_WRITE)
        cluster_name = (form.get("cluster") or "").strip()
        if not cluster_name:
            raise ValueError("cluster is required")
        addresses = await admin.update_topic(
            topic, cluster=cluster_name, perm=perm, order=form.get("order") == "true",
            read_queue_nums=int_field(form, "readQueueNums", 8, low=1, high=1024),
            write_queue_nums=int_field(form, "writeQueueNums", 8, low=1, high=1024))
        return redirect(f"/topics/{quote_plus(topic)}", f"topic {topic} created or updated on {', '.join(addresses)}")
    query = request.query_params.get("q", "").strip()
    show_system = request.query_params.get("system") == "1"
    info = await admin.cluster_info()
    clusters = sorted(info["clusterAddrTable"])
    hidden = BROKER_TOPICS | set(clusters) | set(info["brokerAddrTable"])
    names = [t for t in await admin.topic_list()
             if (show_system or not (is_system_topic(t) or t in hidden)) and query.lower() in t.lower()]
    shown, page, pages = _page(request, names)
    rows = await _topic_summaries(admin, shown)
    return render(request, "topics.jinja", "topics", rows=rows, page=page, pages=pages, total=len(names),
                  q=query, system=show_system, clusters=clusters)


async def topic(request: Request) -> Response:
    admin = await state_of(request).admin_of(request)
    name = validate_topic(request.path_params["topic"])
    route = await admin.topic_route(name)
    status, consumers = await asyncio.gather(admin.topic_status(name), admin.topic_consumers(name))
    masters = {b["brokerName"]: b["brokerAddrs"].get("0") for b in route["brokerDatas"]}
    configs = {}
    for broker_name, address in masters.items():
        if address:
            configs[broker_name] = (await admin.topic_configs(address)).get(name, {})
    config = next(iter(configs.values()), {})
    clusters = sorted({b["cluster"] for b in route["brokerDatas"]})
    return render(request, "topic.jinja", "topics", topic=name, route=route, status=status, consumers=consumers,
                  config=config, clusters=clusters,
                  messages=sum(r["maxOffset"] - r["minOffset"] for r in status))


async def delete_topic(request: Request) -> Response:
    admin = await state_of(request).admin_of(request)
    name = validate_topic(request.path_params["topic"])
    form = await form_of(request)
    cluster_name = (form.get("cluster") or "").strip()
    if not cluster_name:
        raise ValueError("cluster is required")
    addresses = await admin.delete_topic(name, cluster_name)
    return redirect("/topics", f"topic {name} deleted from {', '.join(addresses) or 'no broker'}")


async def _all_groups(admin: AsyncAdmin) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for address in (await admin.masters()).values():
        found.update(await admin.subscription_groups(address))
    return found


async def _group_summary(admin: AsyncAdmin, group: str) -> dict[str, Any]:
    try:
        progress = await admin.consumer_progress(group)
    except (MQClientError, MQBrokerError, OSError, TimeoutError) as exc:
        return {"group": group, "error": str(exc), "diffTotal": 0, "consumeTps": 0.0, "topics": []}
    return {"group": group, "error": "", "diffTotal": progress["diffTotal"], "consumeTps": progress["consumeTps"],
            "topics": sorted({r["topic"] for r in progress["offsetTable"]})}


async def groups(request: Request) -> Response:
    admin = await state_of(request).admin_of(request)
    query = request.query_params.get("q", "").strip()
    show_system = request.query_params.get("system") == "1"
    names = sorted(g for g in await _all_groups(admin)
                   if (show_system or g not in SYSTEM_GROUPS) and query.lower() in g.lower())
    shown, page, pages = _page(request, names)
    rows = await asyncio.gather(*(_group_summary(admin, g) for g in shown))
    return render(request, "groups.jinja", "groups", rows=rows, page=page, pages=pages, total=len(names),
                  q=query, system=show_system)


async def group(request: Request) -> Response:
    state = state_of(request)
    admin = await state.admin_of(request)
    name = request.path_params["group"]
    validate_topic(name)
    state.history.watch(name)
    progress = await admin.consumer_progress(name)
    try:
        connection: dict[str, Any] | None = await admin.consumer_connection(name)
        offline = ""
    except (MQClientError, MQBrokerError) as exc:
        connection, offline = None, str(exc)
    lag = state.history.points(f"lag:{name}")
    if not lag or time.time() - lag[-1][0] > 1.0:
        state.history.add(f"lag:{name}", progress["diffTotal"])
        lag = state.history.points(f"lag:{name}")
    # its own topics before its retry topic
    topics_of_group = sorted({r["topic"] for r in progress["offsetTable"]}, key=lambda t: (is_system_topic(t), t))
    return render(request, "group.jinja", "groups", group=name, progress=progress, connection=connection,
                  offline=offline, lag=lag, topics=topics_of_group, now=default_range()[1])


async def _reset_offline(admin: AsyncAdmin, group: str, topic: str, timestamp_ms: int) -> dict[MessageQueue, int]:
    """mqadmin's resetOffsetByTime for a group with no member online: each queue's offset
    found by time (-1: the end) and committed."""
    offsets = {}
    for mq in await admin.queues(topic):
        offset = await admin.max_offset(mq) if timestamp_ms < 0 else await admin.search_offset(mq, timestamp_ms)
        await admin.update_consumer_offset(group, mq, offset)
        offsets[mq] = offset
    return offsets


async def reset_offsets(request: Request) -> Response:
    admin = await state_of(request).admin_of(request)
    name = request.path_params["group"]
    validate_topic(name)
    form = await form_of(request)
    topic_name = validate_topic((form.get("topic") or "").strip())
    when = (form.get("time") or "").strip()
    timestamp_ms = -1 if when in ("", "-1", "now") else parse_time(when, "time")
    try:
        offsets = await admin.reset_offset_by_time(name, topic_name, timestamp_ms)
    except MQBrokerError as exc:
        if exc.response_code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        offsets = await _reset_offline(admin, name, topic_name, timestamp_ms)
    if not offsets:
        offsets = await _reset_offline(admin, name, topic_name, timestamp_ms)
    text = ", ".join(f"{mq.broker_name}/{mq.queue_id}={offset}" for mq, offset in sorted(offsets.items()))
    return redirect(f"/groups/{quote_plus(name)}", f"offsets of {topic_name} reset: {text}")


async def messages(request: Request) -> Response:
    state = state_of(request)
    admin = await state.admin_of(request)
    params = request.query_params
    msg_id = params.get("id", "").strip()
    topic_name = params.get("topic", "").strip()
    key = params.get("key", "").strip()
    begin, end = params.get("begin", "").strip(), params.get("end", "").strip()
    mode = "form"
    found: list[Any] = []
    detail: dict[str, Any] | None = None
    trace: list[Any] = []
    if msg_id:
        mode = "id"
        msg = await admin.query_msg_by_id(msg_id, validate_topic(topic_name) if topic_name else None,
                                          state.settings.store_broker_addr)
        trace = await consumption_trace(admin, msg)
        detail = message_detail(msg)
    elif topic_name and key:
        mode = "key"
        found = [message_row(m) for m in await admin.query_msg_by_key(validate_topic(topic_name), key)]
    elif topic_name and params.get("offset", "").strip():
        mode = "offset"
        broker = params.get("broker", "").strip()
        if not broker:
            raise ValueError("broker is required with offset")
        at_offset = await admin.query_msg_by_offset(validate_topic(topic_name), broker, int_field(params, "queue", low=0),
                                                    int_field(params, "offset", low=0))
        if at_offset is not None:
            trace = await consumption_trace(admin, at_offset)
            detail = message_detail(at_offset)
    elif topic_name and begin:
        mode = "time"
        begin_ms = parse_time(begin, "begin")
        end_ms = parse_time(end, "end") if end else int(time.time() * 1000)
        found = [message_row(m) for m in await search_time_range(admin, validate_topic(topic_name), begin_ms, end_ms)]
    elif topic_name:
        raise ValueError("give key, begin (and end) or broker, queue and offset with topic")
    default_begin, default_end = default_range()
    return render(request, "messages.jinja", "messages", mode=mode, found=found, detail=detail, trace=trace,
                  params=dict(params), body_view=params.get("body", "text"),
                  default_begin=default_begin, default_end=default_end)


async def message(request: Request) -> Response:
    state = state_of(request)
    admin = await state.admin_of(request)
    msg = await admin.view_message(request.path_params["msg_id"], state.settings.store_broker_addr)
    trace = await consumption_trace(admin, msg)
    return render(request, "messages.jinja", "messages", mode="id", found=[], detail=message_detail(msg),
                  trace=trace, params={"id": msg.offset_msg_id},
                  body_view=request.query_params.get("body", "text"),
                  default_begin=default_range()[0], default_end=default_range()[1])


async def _dlq_messages(admin: AsyncAdmin, topic: str) -> list[dict[str, Any]]:
    rows = []
    for mq in await admin.queues(topic):
        low, high = await asyncio.gather(admin.min_offset(mq), admin.max_offset(mq))
        offset = max(low, high - DLQ_PAGE)
        while offset < high:
            batch = await admin.pull(mq, offset, min(32, high - offset))
            if not batch:
                break
            for msg in batch:
                row = message_row(msg)
                row["originTopic"] = msg.properties.get(MessageConst.RETRY_TOPIC, "")
                row["reconsumeTimes"] = msg.reconsume_times
                rows.append(row)
            offset = batch[-1].queue_offset + 1
    rows.sort(key=lambda r: r["storeTime"], reverse=True)
    return rows


async def dlq(request: Request) -> Response:
    admin = await state_of(request).admin_of(request)
    group_name = request.query_params.get("group", "").strip()
    dlq_topics = [t for t in await admin.topic_list() if is_dlq_topic(t)]
    summaries = await _topic_summaries(admin, dlq_topics)
    rows = [{**s, "group": s["topic"][len(DLQ_GROUP_TOPIC_PREFIX):]} for s in summaries]
    found: list[dict[str, Any]] = []
    if group_name:
        validate_topic(group_name)
        topic_name = DLQ_GROUP_TOPIC_PREFIX + group_name
        if topic_name not in dlq_topics:
            raise ValueError(f"group {group_name} has no dead-letter topic ({topic_name})")
        found = await _dlq_messages(admin, topic_name)
    return render(request, "dlq.jinja", "dlq", rows=rows, group=group_name, found=found)


async def resend(request: Request) -> Response:
    """Send a dead-lettered message back to its group: to ``%RETRY%<group>`` with its
    original topic in RETRY_TOPIC (where a consumer's retries come from), so the group, and
    only it, consumes it again."""
    state = state_of(request)
    form = await form_of(request)
    group_name = validate_topic((form.get("group") or "").strip())
    offset_msg_id = (form.get("id") or "").strip()
    if not offset_msg_id:
        raise ValueError("id is required")
    msg = await (await state.admin_of(request)).view_message(offset_msg_id)
    if msg.topic != DLQ_GROUP_TOPIC_PREFIX + group_name:
        raise ValueError(f"message {offset_msg_id} is in {msg.topic}, not in the dead-letter topic of {group_name}")
    properties = {k: v for k, v in msg.properties.items() if k not in _RESEND_DROPPED}
    properties.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
    properties.setdefault(MessageConst.ORIGIN_MESSAGE_ID, msg.msg_id)
    properties[MessageConst.RECONSUME_TIME] = "0"
    again = Message(retry_topic(group_name), msg.body, flag=msg.flag, properties=properties)
    result = await (await state.producer_of(request)).send(again)
    return redirect(f"/dlq?group={quote_plus(group_name)}",
                    f"message {msg.msg_id} resent to {retry_topic(group_name)}: {result.send_status.name} "
                    f"({result.offset_msg_id})")
