"""The broker's operations endpoint over HTTP: Prometheus metrics, health, a JSON API.

It sits between the server, which starts it, and the request handlers: it reads the data plane
and the coordinators through the same typed :class:`~kcoord.apis.services.Services` the handlers
get, and changes nothing.
"""
