"""Two indexes the entry wrote an entry into for every page and response, though nothing looks them up by an
empty value: ranks (a placement is written unranked) and attention checks (most pages are blocks). Each now
holds only the rows where the value is set: the same uniqueness of ranks, the same lookups of a check's visits."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('surveys', '0018_first_shown_tally'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='itemplacement',
            name='placement_unique_rank',
        ),
        migrations.AlterField(
            model_name='blockvisit',
            name='attention_check',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='visits', to='surveys.attentioncheck'),
        ),
        migrations.AddIndex(
            model_name='blockvisit',
            index=models.Index(condition=models.Q(('attention_check__isnull', False)), fields=['attention_check'], name='visit_by_attention_check'),
        ),
        migrations.AddConstraint(
            model_name='itemplacement',
            constraint=models.UniqueConstraint(condition=models.Q(('rank__isnull', False)), fields=('visit', 'rank'), name='placement_unique_rank'),
        ),
    ]
