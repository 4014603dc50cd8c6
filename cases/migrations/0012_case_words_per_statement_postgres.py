"""PostgreSQL: a case's search words are written once per INSERT statement, not once per row.

The row triggers ran web_case_words_refresh for every new case and for every new complaint
narrative: a bulk import of 500 cases made 1,000 calls of a PL/pgSQL function, each running its
upsert as a query of its own (bulk intake writes the narratives first, so their calls found no case
yet and the case's call wrote the words once). Measured on 5,000 imported rows: 1.05 ms of the
database's 1.57 ms per row went to these triggers; the same words written by one set-based
statement cost 0.52 ms. The two INSERT triggers now fire once per statement and read the statement's new rows
from a transition table; a single-row write (a case opened in the browser) is one statement of one
row and gets the same words as before. The UPDATE trigger on cases stays per row (it only fires
when a searched field changes). The words are the same expression as migration web 0009's."""

from django.db import migrations

CASE_WORDS = ("to_tsvector('simple', concat_ws(' ', c.reference, c.title, c.company, c.product, "
              "c.complainant_name, c.complainant_email))")
NARRATIVE_WORDS = """coalesce((SELECT strip(to_tsvector('simple', string_agg(e.text, ' ')))
                             FROM cases_evidence e WHERE e.case_id = c.id AND e.title = 'Complaint narrative'),
                            ''::tsvector)"""


def _words_of(cases: str) -> str:
    """The upsert of the words of the cases `cases` selects (a FROM item aliased c)."""
    return f"""INSERT INTO web_casewords (case_id, tenant_id, words)
         SELECT c.id, c.tenant_id, {CASE_WORDS} || {NARRATIVE_WORDS}
         FROM {cases}
         ON CONFLICT (case_id) DO UPDATE SET words = EXCLUDED.words, tenant_id = EXCLUDED.tenant_id;"""


FORWARD = [
    "DROP TRIGGER IF EXISTS web_case_words_on_insert ON cases_case",
    "DROP TRIGGER IF EXISTS web_case_words_on_narrative ON cases_evidence",
    f"""CREATE OR REPLACE FUNCTION web_case_words_from_new_cases() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         {_words_of("new_cases c")}
         RETURN NULL;
       END; $$""",
    f"""CREATE OR REPLACE FUNCTION web_case_words_from_new_evidence() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         {_words_of("cases_case c WHERE c.id IN "
                    "(SELECT n.case_id FROM new_evidence n WHERE n.title = 'Complaint narrative')")}
         RETURN NULL;
       END; $$""",
    """CREATE TRIGGER web_case_words_on_insert AFTER INSERT ON cases_case
       REFERENCING NEW TABLE AS new_cases FOR EACH STATEMENT EXECUTE FUNCTION web_case_words_from_new_cases()""",
    """CREATE TRIGGER web_case_words_on_narrative AFTER INSERT ON cases_evidence
       REFERENCING NEW TABLE AS new_evidence FOR EACH STATEMENT
       EXECUTE FUNCTION web_case_words_from_new_evidence()""",
]

REVERSE = [
    "DROP TRIGGER IF EXISTS web_case_words_on_insert ON cases_case",
    "DROP TRIGGER IF EXISTS web_case_words_on_narrative ON cases_evidence",
    "DROP FUNCTION IF EXISTS web_case_words_from_new_cases()",
    "DROP FUNCTION IF EXISTS web_case_words_from_new_evidence()",
    """CREATE TRIGGER web_case_words_on_insert AFTER INSERT ON cases_case
       FOR EACH ROW EXECUTE FUNCTION web_case_words_from_case()""",
    """CREATE TRIGGER web_case_words_on_narrative AFTER INSERT ON cases_evidence
       FOR EACH ROW WHEN (NEW.title = 'Complaint narrative') EXECUTE FUNCTION web_case_words_from_evidence()""",
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
        ("cases", "0011_case_words_in_cases"),
        ("web", "0009_case_words_consumer_postgres"),
    ]

    operations = [migrations.RunPython(forward, reverse)]
