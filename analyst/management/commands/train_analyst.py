"""manage.py train_analyst [--force]

Trains the offline analyst's classifier once, outside any run, and writes its artifact under
ARBITER_ANALYST_DIR (var/analyst/ by default), named by the sha256 of the complaint data and the
training code's version. A second call with the same data and code does nothing and says so in one
line. `make run` runs it before starting the processes; a deployment runs it like `migrate`. Either
way it prints where the artifact is, the data hash, and how long loading it takes."""

import time

from django.core.management.base import BaseCommand, CommandError

from analyst import classifier


class Command(BaseCommand):
    help = "Train the offline analyst's classifier (a no-op when it is trained for these data and this code)."

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="Train again even if the artifact exists.")

    def handle(self, *args, **options):
        try:
            result = classifier.classifier_train(force=options["force"], say=self.stdout.write)
        except OSError as exc:
            raise CommandError(f"Could not write the classifier under {classifier.artifact_dir()}: {exc}") from exc
        artifact = result.artifact
        started = time.perf_counter()
        model = classifier.load_artifact(artifact)
        load_ms = (time.perf_counter() - started) * 1000
        if model is None:
            raise CommandError(f"The artifact {artifact.path} could not be loaded back; see the log.")
        if not result.trained:
            self.stdout.write(f"The offline analyst's classifier is already trained: {artifact.path} "
                              f"(data sha256 {artifact.data_sha256[:16]}…, code v{artifact.code_version}; "
                              f"loads in {load_ms:.0f} ms). Nothing to do.")
            return
        self.stdout.write(f"Trained on {result.examples} complaints, and the signals' sentence reader on "
                          f"{model.signal_reader.trained_on} labelled narratives, in {result.seconds:.1f} s.")
        self.stdout.write(f"Wrote {artifact.path} ({artifact.path.stat().st_size / 1e6:.1f} MB)")
        self.stdout.write(f"  data: {artifact.source} sha256 {artifact.data_sha256}")
        self.stdout.write(f"  code version: v{artifact.code_version}")
        self.stdout.write(f"  loads in {load_ms:.0f} ms")
