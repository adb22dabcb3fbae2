"""Items get a tenant (the requester whose jobs produced them; admin and scheduled work: the system tenant) and
their external category name as an indexed column. Existing items go to their last job's requester, or the system
tenant."""

import secrets

import django.db.models.deletion
from django.db import migrations, models

SYSTEM_TENANT = "trawl-system"  # access.tenancy.SYSTEM_TENANT


def assign_tenants(apps, schema_editor):
    Requester = apps.get_model("access", "Requester")
    Item = apps.get_model("items", "Item")
    system, _ = Requester.objects.get_or_create(
        name=SYSTEM_TENANT, defaults={"is_admin": False, "webhook_secret": secrets.token_hex(32)}
    )
    rows = Item.objects.select_related("last_job__requester").only(
        "pk", "data", "last_job__requester__is_admin", "last_job__requester_id"
    )
    batch = []
    for item in rows.iterator(chunk_size=1000):
        requester = item.last_job.requester if item.last_job_id and item.last_job.requester_id else None
        item.tenant_id = requester.pk if requester is not None and not requester.is_admin else system.pk
        name = (item.data or {}).get("category")
        item.category_name = name if isinstance(name, str) and len(name) <= 300 else ""
        batch.append(item)
        if len(batch) >= 1000:
            Item.objects.bulk_update(batch, ["tenant", "category_name"])
            batch = []
    Item.objects.bulk_update(batch, ["tenant", "category_name"])


class Migration(migrations.Migration):
    dependencies = [
        ("access", "0001_initial"),
        ("items", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="item",
            name="tenant",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="items",
                to="access.requester",
            ),
        ),
        migrations.AddField(
            model_name="item",
            name="category_name",
            field=models.CharField(blank=True, db_index=True, max_length=300),
        ),
        migrations.RunPython(assign_tenants, migrations.RunPython.noop),
    ]
