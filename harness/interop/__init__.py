"""Other tools' formats: TREC run and qrels files, Parquet tables (`harness export`)."""
