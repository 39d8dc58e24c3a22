"""``rocketstore admin``: mqadmin's most used commands, over the wire.

Each subcommand keeps mqadmin's name and short options (``rocketstore admin topicStatus -n
127.0.0.1:9876 -t orders``). Output is a table, or JSON with ``--json``. Failures (no name
server, unknown topic, a broker's error code) end as one line on stderr and exit code 1.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import click

from rocketstore.cli.common import describe_error, echo_json, fail
from rocketstore.client import (
    AdminClient,
    ClientConfig,
    Message,
    MessageExt,
    MessageQueue,
    MQClientError,
    Producer,
)
from rocketstore.client.config import ACCESS_KEY_ENV, SECRET_KEY_ENV
from rocketstore.common.text import is_ascii_int
from rocketstore.remoting.errors import RemotingError

DEFAULT_NAMESRV = "127.0.0.1:9876"


def _namesrv_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """-n, and the ACL account requests are signed with (RocketMQ 4.x plain ACL)."""
    f = click.option("--secret-key", envvar=SECRET_KEY_ENV, default=None,
                     help=f"Its secret key (or ${SECRET_KEY_ENV}).")(f)
    f = click.option("--access-key", envvar=ACCESS_KEY_ENV, default=None,
                     help=f"Sign every request with this ACL account (or ${ACCESS_KEY_ENV}).")(f)
    return click.option("-n", "--namesrv-addr", default=lambda: os.environ.get("NAMESRV_ADDR", DEFAULT_NAMESRV),
                        show_default="NAMESRV_ADDR or 127.0.0.1:9876",
                        help="Name servers, 'host:port;host:port'.")(f)


def _client_config(namesrv_addr: str, access_key: str | None, secret_key: str | None) -> ClientConfig:
    """The clients' settings; ValueError when only one of the keys is given."""
    if (access_key is None) != (secret_key is None):
        raise ValueError("--access-key and --secret-key go together: give both or neither")
    return ClientConfig(namesrv_addr=namesrv_addr, access_key=access_key, secret_key=secret_key)


def _json_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def _admin_command(name: str, **kwargs: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """A subcommand that gets an ``admin`` client and turns expected failures into one line."""

    def decorate(f: Callable[..., Any]) -> click.Command:
        @functools.wraps(f)
        def run(namesrv_addr: str, access_key: str | None, secret_key: str | None, **options: Any) -> None:
            try:
                with AdminClient(config=_client_config(namesrv_addr, access_key, secret_key)) as admin:
                    f(admin, **options)
            except (MQClientError, RemotingError, ValueError, TimeoutError, OSError) as exc:
                raise fail(describe_error(exc), exc) from None

        return admin_group.command(name, **kwargs)(_namesrv_option(run))

    return decorate


@click.group("admin")
def admin_group() -> None:
    """RocketMQ administration over the wire (mqadmin's commands and options)."""


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        click.echo("  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip())


def _time(ms: int) -> str:
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def _message_json(msg: MessageExt, with_body: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "topic": msg.topic, "brokerName": msg.broker_name, "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset, "commitLogOffset": msg.commit_log_offset, "msgId": msg.msg_id,
        "offsetMsgId": msg.offset_msg_id, "tags": msg.tags, "keys": msg.keys, "storeSize": msg.store_size,
        "bornTimestamp": msg.born_timestamp, "bornHost": msg.born_host, "storeTimestamp": msg.store_timestamp,
        "storeHost": msg.store_host, "sysFlag": msg.sys_flag, "flag": msg.flag,
        "reconsumeTimes": msg.reconsume_times, "properties": msg.properties,
    }
    if with_body:
        try:
            data["body"] = msg.body.decode("utf-8")
        except UnicodeDecodeError:
            data["bodyHex"] = msg.body.hex()
    return data


def _print_message(msg: MessageExt) -> None:
    data = _message_json(msg)
    for key in ("topic", "tags", "keys", "queueId", "queueOffset", "commitLogOffset", "reconsumeTimes",
                "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "sysFlag", "msgId", "offsetMsgId",
                "properties"):
        value = data[key]
        if key.endswith("Timestamp"):
            value = f"{_time(value)} ({value})"
        click.echo(f"{key + ':':<17} {value}")
    body = data.get("body", data.get("bodyHex"))
    click.echo(f"{'body:':<17} {body}")


def _print_messages(messages: list[MessageExt], as_json: bool) -> None:
    if as_json:
        echo_json([_message_json(m) for m in messages])
        return
    print_table(["#MessageId", "#QID", "#Offset", "#Tags", "#Keys", "#StoreTime"],
                [[m.msg_id, m.queue_id, m.queue_offset, m.tags or "", " ".join(m.keys), _time(m.store_timestamp)]
                 for m in messages])


# ---- topics ---------------------------------------------------------------------------------


@_admin_command("updateTopic")
@click.option("-t", "--topic", required=True)
@click.option("-c", "--cluster-name", help="Create on every master of this cluster.")
@click.option("-b", "--broker-addr", help="Create on this broker (host:port).")
@click.option("-r", "--read-queue-nums", type=int, default=8, show_default=True)
@click.option("-w", "--write-queue-nums", type=int, default=8, show_default=True)
@click.option("-p", "--perm", type=int, default=6, show_default=True, help="2 write, 4 read, 6 both.")
@click.option("-o", "--order", type=bool, default=False, show_default=True)
@click.option("--memory", is_flag=True, default=False,
              help="A memory topic: messages held in the broker's memory only, lost at restart "
                   "(the broker needs memoryTopicEnable=true).")
def update_topic(admin: AdminClient, topic: str, cluster_name: str | None, broker_addr: str | None,
                 read_queue_nums: int, write_queue_nums: int, perm: int, order: bool,
                 memory: bool) -> None:
    """Create or update a topic."""
    if (cluster_name is None) == (broker_addr is None):
        raise ValueError("give exactly one of -c/--cluster-name and -b/--broker-addr")
    addresses = admin.update_topic(topic, cluster=cluster_name, broker_addr=broker_addr,
                                   read_queue_nums=read_queue_nums, write_queue_nums=write_queue_nums,
                                   perm=perm, order=order, memory=memory)
    for address in addresses:
        click.echo(f"create topic to {address} success.")
    click.echo(f"TopicConfig [topicName={topic}, readQueueNums={read_queue_nums}, "
               f"writeQueueNums={write_queue_nums}, perm={perm}, order={str(order).lower()}"
               + (", memory=true]" if memory else "]"))


@_admin_command("deleteTopic")
@click.option("-t", "--topic", required=True)
@click.option("-c", "--cluster-name", required=True)
def delete_topic(admin: AdminClient, topic: str, cluster_name: str) -> None:
    """Delete a topic from a cluster's brokers and from the name servers."""
    admin.delete_topic(topic, cluster_name)
    click.echo(f"delete topic [{topic}] from cluster [{cluster_name}] success.")


@_admin_command("topicList")
@_json_option
def topic_list(admin: AdminClient, as_json: bool) -> None:
    """Every topic the name server knows."""
    topics = admin.topic_list()
    if as_json:
        echo_json({"topicList": topics})
    else:
        for topic in topics:
            click.echo(topic)


@_admin_command("topicRoute")
@click.option("-t", "--topic", required=True)
@_json_option
def topic_route(admin: AdminClient, topic: str, as_json: bool) -> None:
    """A topic's route: its queues per broker and the brokers' addresses."""
    route = admin.topic_route(topic)
    if as_json:
        echo_json(route)
        return
    addrs = {b["brokerName"]: b["brokerAddrs"] for b in route["brokerDatas"]}
    print_table(["#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueueNums", "#WriteQueueNums", "#Perm"],
                [[next((b["cluster"] for b in route["brokerDatas"] if b["brokerName"] == q["brokerName"]), ""),
                  q["brokerName"], ",".join(f"{k}:{v}" for k, v in addrs.get(q["brokerName"], {}).items()),
                  q["readQueueNums"], q["writeQueueNums"], q["perm"]] for q in route["queueDatas"]])


@_admin_command("topicStatus")
@click.option("-t", "--topic", required=True)
@_json_option
def topic_status(admin: AdminClient, topic: str, as_json: bool) -> None:
    """Min and max offset of each queue of a topic."""
    rows = admin.topic_status(topic)
    if as_json:
        echo_json(rows)
        return
    print_table(["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"],
                [[r["brokerName"], r["queueId"], r["minOffset"], r["maxOffset"], _time(r["lastUpdateTimestamp"])]
                 for r in rows])


# ---- clusters and brokers -------------------------------------------------------------------


@_admin_command("clusterList")
@_json_option
def cluster_list(admin: AdminClient, as_json: bool) -> None:
    """The brokers of every cluster, with their throughput."""
    rows = admin.cluster_list()
    if as_json:
        echo_json(rows)
        return
    print_table(["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS", "#OutTPS",
                 "#InTotalToday", "#OutTotalToday"],
                [[r["cluster"], r["brokerName"], r["brokerId"], r["address"], r["version"] or r.get("error", ""),
                  r["putTps"], r["getTransferedTps"], r["msgPutTotalTodayNow"], r["msgGetTotalTodayNow"]]
                 for r in rows])


@_admin_command("brokerStatus")
@click.option("-b", "--broker-addr", required=True)
@_json_option
def broker_status(admin: AdminClient, broker_addr: str, as_json: bool) -> None:
    """A broker's runtime figures."""
    table = admin.broker_status(broker_addr)
    if as_json:
        echo_json(table)
        return
    for key, value in table.items():
        click.echo(f"{key:<40}: {value}")


# ---- controller mode -------------------------------------------------------------------------


def _print_groups(groups: dict[str, Any]) -> None:
    rows = []
    for name, g in sorted(groups.items()):
        for r in g["replicas"]:
            rows.append([name, r["brokerId"], r["brokerAddress"],
                         "master" if r["brokerId"] == g["masterBrokerId"] else "slave",
                         g["masterEpoch"], "yes" if r["brokerId"] in g["syncStateSet"] else "no",
                         g["syncStateSetEpoch"], r["maxOffset"], "yes" if r["alive"] else "no"])
    print_table(["#brokerName", "#brokerId", "#address", "#role", "#masterEpoch", "#inSyncStateSet",
                 "#syncStateSetEpoch", "#maxOffset", "#alive"], rows)


@_admin_command("getSyncStateSet")
@click.option("-a", "--controller-address", required=True, help="The controller (host:port).")
@click.option("-b", "--broker-name", "broker_names", multiple=True,
              help="Broker groups (default: every group the controller knows).")
@_json_option
def get_sync_state_set(admin: AdminClient, controller_address: str, broker_names: tuple[str, ...],
                       as_json: bool) -> None:
    """Each broker group's master, epochs and SyncStateSet, as the controller holds them."""
    groups = admin.get_sync_state_set(controller_address, list(broker_names))
    if as_json:
        echo_json(groups)
    else:
        _print_groups(groups)


@_admin_command("getControllerMetaData")
@click.option("-a", "--controller-address", required=True, help="The controller (host:port).")
@_json_option
def get_controller_metadata(admin: AdminClient, controller_address: str, as_json: bool) -> None:
    """The controller's address and whether it leads."""
    data = admin.get_controller_metadata(controller_address)
    if as_json:
        echo_json(data)
        return
    for key, value in sorted(data.items()):
        click.echo(f"{key:<26}: {value}")


@_admin_command("electMaster")
@click.option("-a", "--controller-address", required=True, help="The controller (host:port).")
@click.option("--broker-name", "-bn", "broker_name", required=True)
@click.option("-b", "--broker-id", type=int, help="The replica to elect (default: the best "
              "candidate of the SyncStateSet).")
@click.option("-c", "--cluster-name", help="Accepted as mqadmin takes it; not needed.")
@_json_option
def elect_master(admin: AdminClient, controller_address: str, broker_name: str,
                 broker_id: int | None, cluster_name: str | None, as_json: bool) -> None:
    """Elect a master of a broker group now (from its SyncStateSet)."""
    group = admin.elect_master(controller_address, broker_name, broker_id)
    if as_json:
        echo_json(group)
    else:
        _print_groups({broker_name: group})


@_admin_command("getBrokerEpoch")
@click.option("-b", "--broker-name", help="Every replica of this broker group (from the name server).")
@click.option("--broker-addr", help="This broker only (host:port).")
@_json_option
def get_broker_epoch(admin: AdminClient, broker_name: str | None, broker_addr: str | None,
                     as_json: bool) -> None:
    """Each replica's epochs: epoch, its start and end offsets."""
    if broker_addr:
        addresses = [broker_addr]
    elif broker_name:
        table = admin.cluster_info()["brokerAddrTable"]
        if broker_name not in table:
            raise ValueError(f"broker group {broker_name!r} is unknown to the name server")
        addresses = [a for _, a in sorted(table[broker_name]["brokerAddrs"].items())]
    else:
        raise ValueError("give --broker-name or --broker-addr")
    results = {address: admin.get_broker_epoch(address) for address in addresses}
    if as_json:
        echo_json(results)
        return
    rows = [[address, r["brokerName"], r["brokerId"], e["epoch"], e["startOffset"], e["endOffset"]]
            for address, r in results.items() for e in r["epochList"]]
    print_table(["#address", "#brokerName", "#brokerId", "#epoch", "#startOffset", "#endOffset"], rows)


# ---- consumer and producer groups -----------------------------------------------------------


@_admin_command("consumerProgress")
@click.option("-g", "--consumer-group", required=True)
@click.option("-t", "--topic", help="Only this topic.")
@_json_option
def consumer_progress(admin: AdminClient, consumer_group: str, topic: str | None, as_json: bool) -> None:
    """A consumer group's offsets and lag per queue."""
    stats = admin.consumer_progress(consumer_group, topic)
    if as_json:
        echo_json(stats)
        return
    print_table(["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"],
                [[r["topic"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"],
                  _time(r["lastTimestamp"])] for r in stats["offsetTable"]])
    click.echo("")
    click.echo(f"Consume TPS: {stats['consumeTps']:.2f}")
    click.echo(f"Diff Total: {stats['diffTotal']}")


def _connections(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(data)
        return
    print_table(["#ClientId", "#ClientAddr", "#Language", "#Version"],
                [[c.get("clientId"), c.get("clientAddr"), c.get("language"), c.get("version")]
                 for c in data.get("connectionSet") or []])


@_admin_command("consumerConnection")
@click.option("-g", "--consumer-group", required=True)
@_json_option
def consumer_connection(admin: AdminClient, consumer_group: str, as_json: bool) -> None:
    """The clients of a consumer group and what they subscribe to."""
    data = admin.consumer_connection(consumer_group)
    _connections(data, as_json)
    if not as_json:
        click.echo("")
        for topic, sub in (data.get("subscriptionTable") or {}).items():
            click.echo(f"{topic:<40} {sub.get('subString', '') if isinstance(sub, dict) else sub}")
        click.echo(f"ConsumeType: {data.get('consumeType')}  MessageModel: {data.get('messageModel')}  "
                   f"ConsumeFromWhere: {data.get('consumeFromWhere')}")


@_admin_command("producerConnection")
@click.option("-g", "--producer-group", required=True)
@click.option("-t", "--topic", required=True)
@_json_option
def producer_connection(admin: AdminClient, producer_group: str, topic: str, as_json: bool) -> None:
    """The clients of a producer group."""
    _connections(admin.producer_connection(producer_group, topic), as_json)


def _parse_time(text: str) -> int:
    """ms since the epoch, 'now', or yyyy-MM-dd#HH:mm:ss:SSS (mqadmin's form)."""
    if text == "now":
        return int(time.time() * 1000)
    if is_ascii_int(text, signed=True):
        return int(text)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%d#%H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            return int(datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise ValueError(f"timestamp {text!r} is neither ms, 'now' nor yyyy-MM-dd#HH:mm:ss:SSS")


@_admin_command("resetOffsetByTime")
@click.option("-g", "--group", required=True)
@click.option("-t", "--topic", required=True)
@click.option("-s", "--timestamp", required=True, help="ms, 'now', or yyyy-MM-dd#HH:mm:ss:SSS.")
@click.option("-f", "--force", type=bool, default=True, show_default=True)
@_json_option
def reset_offset_by_time(admin: AdminClient, group: str, topic: str, timestamp: str, force: bool,
                         as_json: bool) -> None:
    """Move a group's offsets of a topic to a point in time."""
    offsets = admin.reset_offset_by_time(group, topic, _parse_time(timestamp), force)
    rows = sorted(offsets.items())
    if as_json:
        echo_json([{**mq.to_json(), "offset": offset} for mq, offset in rows])
        return
    print_table(["#brokerName", "#queueId", "#offset"], [[mq.broker_name, mq.queue_id, offset] for mq, offset in rows])


# ---- messages -------------------------------------------------------------------------------


@_admin_command("queryMsgById")
@click.option("-i", "--msg-id", required=True)
@click.option("-t", "--topic", help="Needed to find a message by its client id (UNIQ_KEY).")
@_json_option
def query_msg_by_id(admin: AdminClient, msg_id: str, topic: str | None, as_json: bool) -> None:
    """A message by its id (the broker's offset id, or the client's id with -t)."""
    msg = admin.query_msg_by_id(msg_id, topic)
    if as_json:
        echo_json(_message_json(msg))
    else:
        _print_message(msg)


@_admin_command("queryMsgByKey")
@click.option("-t", "--topic", required=True)
@click.option("-k", "--msg-key", required=True)
@click.option("-m", "--max-num", type=int, default=64, show_default=True)
@_json_option
def query_msg_by_key(admin: AdminClient, topic: str, msg_key: str, max_num: int, as_json: bool) -> None:
    """Messages of a topic by key."""
    _print_messages(admin.query_msg_by_key(topic, msg_key, max_num), as_json)


@_admin_command("queryMsgByOffset")
@click.option("-t", "--topic", required=True)
@click.option("-b", "--broker-name", required=True)
@click.option("-i", "--queue-id", type=int, required=True)
@click.option("-o", "--offset", type=int, required=True)
@_json_option
def query_msg_by_offset(admin: AdminClient, topic: str, broker_name: str, queue_id: int, offset: int,
                        as_json: bool) -> None:
    """The message at a queue offset."""
    msg = admin.query_msg_by_offset(topic, broker_name, queue_id, offset)
    if msg is None:
        raise MQClientError(f"no message at offset {offset} of {topic}@{broker_name}#{queue_id}")
    if as_json:
        echo_json(_message_json(msg))
    else:
        _print_message(msg)


@admin_group.command("sendMessage")
@_namesrv_option
@click.option("-t", "--topic", required=True)
@click.option("-p", "--body", required=True, help="The body (UTF-8 text).")
@click.option("-k", "--keys", help="Keys, space-separated.")
@click.option("-c", "--tags")
@click.option("-b", "--broker-name", help="Send to this broker (with -i).")
@click.option("-i", "--queue-id", type=int, help="Send to this queue (with -b).")
@_json_option
def send_message(namesrv_addr: str, access_key: str | None, secret_key: str | None, topic: str, body: str,
                 keys: str | None, tags: str | None, broker_name: str | None, queue_id: int | None,
                 as_json: bool) -> None:
    """Send one message and print the result."""
    if (broker_name is None) != (queue_id is None):
        raise fail("give both -b/--broker-name and -i/--queue-id, or neither")
    try:
        config = _client_config(namesrv_addr, access_key, secret_key)
        with Producer("TOOLS_PRODUCER", namesrv_addr=namesrv_addr, access_key=config.access_key,
                      secret_key=config.secret_key) as producer:
            msg = Message(topic, body.encode("utf-8"), tags=tags, keys=keys.split() if keys else None)
            queue = MessageQueue(topic, broker_name, queue_id) if broker_name is not None and queue_id is not None \
                else None
            result = producer.send(msg, queue=queue)
    except (MQClientError, RemotingError, ValueError, TypeError, TimeoutError, OSError) as exc:
        raise fail(describe_error(exc), exc) from None
    data = {"sendStatus": result.send_status.value, "msgId": result.msg_id, "offsetMsgId": result.offset_msg_id,
            "brokerName": result.message_queue.broker_name, "queueId": result.message_queue.queue_id,
            "queueOffset": result.queue_offset}
    if as_json:
        echo_json(data)
    else:
        print_table(["#Broker Name", "#QID", "#Send Result", "#MsgId"],
                    [[data["brokerName"], data["queueId"], data["sendStatus"], data["msgId"]]])


@_admin_command("consumeMessage")
@click.option("-t", "--topic", required=True)
@click.option("-b", "--broker-name", help="Only this broker's queues.")
@click.option("-i", "--queue-id", type=int, help="Only this queue.")
@click.option("-o", "--offset", type=int, help="Start here (default: each queue's first message).")
@click.option("-c", "--count", type=int, default=128, show_default=True, help="At most this many messages.")
@click.option("-s", "--begin-timestamp", help="Only messages stored from then on (ms or yyyy-MM-dd#HH:mm:ss:SSS).")
@_json_option
def consume_message(admin: AdminClient, topic: str, broker_name: str | None, queue_id: int | None,
                    offset: int | None, count: int, begin_timestamp: str | None, as_json: bool) -> None:
    """Read a topic's messages (no consumer group offsets are touched)."""
    if count <= 0:
        raise ValueError("-c/--count must be positive")
    begin = _parse_time(begin_timestamp) if begin_timestamp else 0
    queues = [mq for mq in admin.queues(topic)
              if (broker_name is None or mq.broker_name == broker_name) and (queue_id is None or mq.queue_id == queue_id)]
    if not queues:
        raise MQClientError(f"no queue of {topic} matches the -b/-i given")
    found: list[MessageExt] = []
    for mq in queues:
        position = offset if offset is not None else admin.min_offset(mq)
        end = admin.max_offset(mq)
        while position < end and len(found) < count:
            batch = admin.pull(mq, position, min(32, count - len(found)))
            if not batch:
                break
            found.extend(m for m in batch if m.store_timestamp >= begin)
            position = batch[-1].queue_offset + 1
        if len(found) >= count:
            break
    if as_json:
        echo_json([_message_json(m) for m in found])
        return
    for msg in found:
        body = msg.body.decode("utf-8", "replace")
        click.echo(f"{msg.broker_name}#{msg.queue_id}@{msg.queue_offset} msgId={msg.msg_id} "
                   f"tags={msg.tags or ''} keys={' '.join(msg.keys)} body={body}")
    click.echo(f"{len(found)} message(s)")
