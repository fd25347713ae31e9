from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('surveys', '0011_block_allocation'),
    ]

    operations = [
        migrations.AddField(
            model_name='study',
            name='content_version',
            field=models.PositiveIntegerField(db_default=1, default=1, editable=False),
        ),
    ]
