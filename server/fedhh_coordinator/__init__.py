"""The coordinator service: runs OptPrefixTree rounds over the device fleet and the
secure-aggregation service, with the privacy ledger and SQLite persistence."""
