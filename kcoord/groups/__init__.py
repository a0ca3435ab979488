"""What every group type shares: one namespace of group ids per coordinator partition, group
config overrides, and the store the coordinator runtime holds for each partition of
``__consumer_offsets``. The group types themselves (classic/, share/) plug into it."""

OFFSETS_TOPIC = "__consumer_offsets"
