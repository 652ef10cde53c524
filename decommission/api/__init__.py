"""The decommission API: shapes (``serializers``), views and routes (``urls``)."""
