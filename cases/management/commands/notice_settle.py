"""manage.py notice_settle <notice-id> (--sent --message-id ID | --failed) --reason TEXT [--user NAME]

Settles a notice whose delivery is unknown (or stuck `sending`) after reading the mail log: --sent
with the Message-ID found there, or --failed (it can then be sent again). Audited with the reason,
through cases.services.notice_settle. Exits 1 with the reason when refused; nothing changes then."""

from django.core.management.base import CommandError

from accounts.models import User
from cases.models import Notice
from cases.services import notice_settle
from core.actors import Actor
from core.commands import DatabaseCommand
from core.errors import DomainError


class Command(DatabaseCommand):
    help = "Settle a notice whose email delivery is unknown: mark it sent (Message-ID) or failed (retryable)."

    def add_arguments(self, parser):
        parser.add_argument("notice_id", type=int, help="The notice's id (N12 → 12).")
        outcome = parser.add_mutually_exclusive_group(required=True)
        outcome.add_argument("--sent", action="store_true", help="The mail log shows it was accepted.")
        outcome.add_argument("--failed", action="store_true", help="It certainly did not go out.")
        parser.add_argument("--message-id", default="", help="With --sent: the Message-ID found in the mail log.")
        parser.add_argument("--reason", required=True, help="What the mail log or provider showed (audited).")
        parser.add_argument("--user", help="Act as this user (a supervisor or admin); default: system 'cli'.")

    def handle(self, *args, **options):
        notice = Notice.objects.filter(pk=options["notice_id"]).first()
        if notice is None:
            raise CommandError(f"No notice {options['notice_id']}.")
        actor = Actor.system("cli")
        if options["user"]:
            user = User.objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"No user {options['user']!r}.")
            actor = Actor.for_user(user)
        try:
            settled = notice_settle(actor=actor, notice=notice, outcome="sent" if options["sent"] else "failed",
                                    reason=options["reason"], message_id=options["message_id"])
        except DomainError as exc:
            details = "; ".join(f"{name}: {' '.join(problems)}" for name, problems in exc.fields.items())
            raise CommandError(exc.message + (f" ({details})" if details else "")) from exc
        self.stdout.write(f"Notice N{settled.pk} settled: {settled.status}.")
