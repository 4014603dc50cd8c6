"""PostgreSQL: keep web_casewords (the queue's search document per case) up to date with triggers,
index it, and fill it for the cases that exist (ADR 0008).

A case's words are to_tsvector('simple', reference, title, company, product) plus its complaint
narrative's words (positions stripped): one GIN lookup then finds the cases that have every word
of a search, wherever each word is. Triggers, not Python, write it: cases and narratives are
written by the cases services (another app's), and a trigger cannot be forgotten by a new write
path. Evidence is append-only, so only INSERT matters there; a case row re-computes its words only
when one of the four fields changed. The tsvector is stored out of line (STORAGE EXTERNAL with a
low toast_tuple_target): the heap rows a lookup visits stay ~50 bytes, so fetching 20,000 matches
reads a few hundred pages, not the narratives' 100 MB."""

from django.db import migrations

FORWARD = [
    "ALTER TABLE web_casewords ALTER COLUMN words SET STORAGE EXTERNAL",
    "ALTER TABLE web_casewords SET (toast_tuple_target = 128)",
    "CREATE INDEX web_casewords_words_gin ON web_casewords USING GIN (words)",
    "CREATE INDEX web_casewords_tenant ON web_casewords (tenant_id)",
    """CREATE OR REPLACE FUNCTION web_case_words_refresh(p_case bigint) RETURNS void
       LANGUAGE sql AS $$
         INSERT INTO web_casewords (case_id, tenant_id, words)
         SELECT c.id, c.tenant_id,
                to_tsvector('simple', concat_ws(' ', c.reference, c.title, c.company, c.product))
                || coalesce((SELECT strip(to_tsvector('simple', string_agg(e.text, ' ')))
                             FROM cases_evidence e WHERE e.case_id = c.id AND e.title = 'Complaint narrative'),
                            ''::tsvector)
         FROM cases_case c WHERE c.id = p_case
         ON CONFLICT (case_id) DO UPDATE SET words = EXCLUDED.words, tenant_id = EXCLUDED.tenant_id;
       $$""",
    """CREATE OR REPLACE FUNCTION web_case_words_from_case() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         PERFORM web_case_words_refresh(NEW.id);
         RETURN NULL;
       END; $$""",
    """CREATE OR REPLACE FUNCTION web_case_words_from_evidence() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         PERFORM web_case_words_refresh(NEW.case_id);
         RETURN NULL;
       END; $$""",
    """CREATE TRIGGER web_case_words_on_insert AFTER INSERT ON cases_case
       FOR EACH ROW EXECUTE FUNCTION web_case_words_from_case()""",
    """CREATE TRIGGER web_case_words_on_update AFTER UPDATE ON cases_case
       FOR EACH ROW WHEN (OLD.reference IS DISTINCT FROM NEW.reference OR OLD.title IS DISTINCT FROM NEW.title
                          OR OLD.company IS DISTINCT FROM NEW.company OR OLD.product IS DISTINCT FROM NEW.product)
       EXECUTE FUNCTION web_case_words_from_case()""",
    """CREATE TRIGGER web_case_words_on_narrative AFTER INSERT ON cases_evidence
       FOR EACH ROW WHEN (NEW.title = 'Complaint narrative') EXECUTE FUNCTION web_case_words_from_evidence()""",
    # The cases that exist already.
    """INSERT INTO web_casewords (case_id, tenant_id, words)
       SELECT c.id, c.tenant_id,
              to_tsvector('simple', concat_ws(' ', c.reference, c.title, c.company, c.product))
              || coalesce(n.words, ''::tsvector)
       FROM cases_case c
       LEFT JOIN (SELECT e.case_id, strip(to_tsvector('simple', string_agg(e.text, ' '))) AS words
                  FROM cases_evidence e WHERE e.title = 'Complaint narrative' GROUP BY e.case_id) n
              ON n.case_id = c.id
       ON CONFLICT (case_id) DO NOTHING""",
]
REVERSE = [
    "DROP TRIGGER IF EXISTS web_case_words_on_narrative ON cases_evidence",
    "DROP TRIGGER IF EXISTS web_case_words_on_update ON cases_case",
    "DROP TRIGGER IF EXISTS web_case_words_on_insert ON cases_case",
    "DROP FUNCTION IF EXISTS web_case_words_from_evidence()",
    "DROP FUNCTION IF EXISTS web_case_words_from_case()",
    "DROP FUNCTION IF EXISTS web_case_words_refresh(bigint)",
    "DROP INDEX IF EXISTS web_casewords_tenant",
    "DROP INDEX IF EXISTS web_casewords_words_gin",
]


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
        ("web", "0003_case_words"),
    ]

    operations = [migrations.RunPython(forward, reverse)]
