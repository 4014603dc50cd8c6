"""PostgreSQL: the search document of a case also holds its consumer's name and email address, so
the global search (and the queue's) finds a case by its consumer. The refresh function and the
case UPDATE trigger are redefined with the two fields, and every case's words are refilled."""

from django.db import migrations

WORDS = ("to_tsvector('simple', concat_ws(' ', {c}.reference, {c}.title, {c}.company, {c}.product, "
         "{c}.complainant_name, {c}.complainant_email))")


def _refresh_function(words: str) -> str:
    return f"""CREATE OR REPLACE FUNCTION web_case_words_refresh(p_case bigint) RETURNS void
       LANGUAGE sql AS $$
         INSERT INTO web_casewords (case_id, tenant_id, words)
         SELECT c.id, c.tenant_id,
                {words}
                || coalesce((SELECT strip(to_tsvector('simple', string_agg(e.text, ' ')))
                             FROM cases_evidence e WHERE e.case_id = c.id AND e.title = 'Complaint narrative'),
                            ''::tsvector)
         FROM cases_case c WHERE c.id = p_case
         ON CONFLICT (case_id) DO UPDATE SET words = EXCLUDED.words, tenant_id = EXCLUDED.tenant_id;
       $$"""


def _update_trigger(fields: tuple[str, ...]) -> list[str]:
    changed = " OR ".join(f"OLD.{f} IS DISTINCT FROM NEW.{f}" for f in fields)
    return ["DROP TRIGGER IF EXISTS web_case_words_on_update ON cases_case",
            f"""CREATE TRIGGER web_case_words_on_update AFTER UPDATE ON cases_case
                FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION web_case_words_from_case()"""]


def _refill(words: str) -> str:
    return f"""UPDATE web_casewords w SET words = {words} || coalesce(n.words, ''::tsvector)
       FROM cases_case c
       LEFT JOIN (SELECT e.case_id, strip(to_tsvector('simple', string_agg(e.text, ' '))) AS words
                  FROM cases_evidence e WHERE e.title = 'Complaint narrative' GROUP BY e.case_id) n
              ON n.case_id = c.id
       WHERE w.case_id = c.id"""


OLD_WORDS = "to_tsvector('simple', concat_ws(' ', {c}.reference, {c}.title, {c}.company, {c}.product))"
FIELDS = ("reference", "title", "company", "product")
FORWARD = [_refresh_function(WORDS.format(c="c")),
           *_update_trigger((*FIELDS, "complainant_name", "complainant_email")), _refill(WORDS.format(c="c"))]
REVERSE = [_refresh_function(OLD_WORDS.format(c="c")), *_update_trigger(FIELDS), _refill(OLD_WORDS.format(c="c"))]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in FORWARD:
            schema_editor.execute(statement)


def reverse(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in REVERSE:
            schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ("web", "0008_case_words_moved_to_cases"),
    ]

    operations = [migrations.RunPython(forward, reverse)]
