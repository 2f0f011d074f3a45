"""The typed core every layer shares: the data model (datasets, items, records, predictions,
audio), the provider contract (`types`), errors, and the guarded reading of files."""
