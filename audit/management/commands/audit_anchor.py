
from audit.anchors import anchor_path, anchor_write
from core.commands import DatabaseCommand


class Command(DatabaseCommand):
    help = ("Append a signed anchor of every audit stream head to ARBITER_AUDIT_ANCHOR_DIR/anchors.jsonl "
            "(outside the database); audit_verify checks the ledger against the latest one.")

    def handle(self, *args, **options):
        anchor = anchor_write()
        self.stdout.write(self.style.SUCCESS(
            f"Anchored {len(anchor.heads)} audit stream heads at {anchor.anchored_at} "
            f"(key {anchor.key_id}) in {anchor_path()}."))
