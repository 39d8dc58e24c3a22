"""The web console (``rocketstore console``): what rocketmq-dashboard shows, served by the
rocketstore package itself, no JVM and no second deployment.

Pages (stable URLs a person can bookmark): ``/cluster``, ``/topics``, ``/topics/{topic}``,
``/groups``, ``/groups/{group}``, ``/messages`` (``?id=ID``, ``?topic=T&key=K``,
``?topic=T&begin=..&end=..``, ``?topic=T&broker=B&queue=Q&offset=O``), ``/messages/{offsetMsgId}``
and ``/dlq``. Everything comes from the name server and the brokers over the admin protocol
(:class:`rocketstore.client.AsyncAdmin`); the console never opens a store's files. It is a
Starlette application (the ``console`` extra), plain HTML from Jinja2 templates, charts drawn
as inline SVG.
"""

from rocketstore.console.app import ConsoleSettings, create_app

__all__ = ["ConsoleSettings", "create_app"]
