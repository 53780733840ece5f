"""PySpark Python Data Source (streaming and batch) that reads through the broker Fetch API."""
