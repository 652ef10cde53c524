"""A site's MAAS over plain http needs ``maas_allow_http`` in production (docs/security.md,
T22). Sites that already have an http MAAS URL keep working: the upgrade sets the flag for them,
which an operator turns off once their MAAS serves TLS (docs/security.md, "Operating notes")."""

from django.db import migrations, models


def grandfather(apps, schema_editor):
    site = apps.get_model("maas_domain", "MaasSite")
    site.objects.filter(maas_url__istartswith="http:").update(maas_allow_http=True)


class Migration(migrations.Migration):
    dependencies = [
        ("maas_domain", "0015_site_region"),
    ]

    operations = [
        migrations.AddField(
            model_name="maassite",
            name="maas_allow_http",
            field=models.BooleanField(
                default=False,
                help_text="This site's MAAS may be reached over plain http: its API key's "
                "signature and the IPMI passwords then cross the network in the clear. "
                "Production refuses an http MAAS URL without it; the embedded stack allows it.",
            ),
        ),
        migrations.RunPython(grandfather, migrations.RunPython.noop),
    ]
