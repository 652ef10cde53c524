"""The reconciliation API: shapes (``serializers``), views and routes (``urls``)."""
