"""The repair workflow kind (docs/repair.md): a quarantined or cordoned node handed to repair
with a frozen RMA packet and its machine Broken in MAAS, then requalified: commissioned again,
judged, tested and returned only on facts newer than the repair."""
