"""Every item has a tenant now (0002 assigned them): make it required and unique per (tenant, scraper, fingerprint).
Apart from 0002 so PostgreSQL alters the table in a transaction without that migration's row updates pending."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("items", "0002_item_tenant_category_name")]

    operations = [
        migrations.AlterField(
            model_name="item",
            name="tenant",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="items", to="access.requester"
            ),
        ),
        migrations.RemoveConstraint(model_name="item", name="unique_item_per_scraper"),
        migrations.AddConstraint(
            model_name="item",
            constraint=models.UniqueConstraint(
                fields=("tenant", "scraper", "fingerprint"), name="unique_item_per_tenant_scraper"
            ),
        ),
    ]
