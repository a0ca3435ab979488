"""Config types as DescribeConfigs reports them (Kafka's ConfigEntry.ConfigType ids)."""

TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 4, 5, 6, 7
TYPE_PASSWORD = 9
