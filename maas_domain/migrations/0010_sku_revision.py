import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("maas_domain", "0009_api_token_scopes_and_access_roles")]

    operations = [
        migrations.AddField(
            model_name="sku",
            name="revision",
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="sku",
            name="created_at",
            field=models.DateTimeField(auto_now_add=True, default=django.utils.timezone.now),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="sku",
            name="updated_at",
            field=models.DateTimeField(auto_now=True),
        ),
    ]
