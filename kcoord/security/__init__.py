"""Who a client is and what it may do: principals, SASL and TLS authentication, credentials."""
