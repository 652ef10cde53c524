from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from maas_domain import retention
        from workflows.archive import prune_timelines

        # closed workflows' timelines: archived, then pruned (docs/operations.md, "Retention")
        retention.register("workflow_timelines", "RETENTION_TIMELINE_DAYS", 86400, prune_timelines)
