-- Once per connection: the exporter's session is read-only and never leaves a transaction open.
SET default_transaction_read_only = on
