"""The cluster metadata KRaft keeps in ``__cluster_metadata``, as far as kcoord needs it: SCRAM
credentials and ACLs, event-sourced on a coordinator runtime of their own, and the authorizer
that reads them."""

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
