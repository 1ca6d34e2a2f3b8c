"""Command line of the grading tools.

    python -m grading grade [--assignment 01_attention ...] [--student ID ...] [--workers 2] [--demo auto|yes|no]
                            [--resume] [--scheduler tls://HOST:8786 --tls-ca-file ca.pem --tls-cert ME.pem
                            --tls-key ME-key.pem] [--insecure] [--engine auto|dask|processes]
    python -m grading cluster-certs --out DIR NAME [NAME ...]   (a course CA and one certificate per machine)
    python -m grading preflight [--kernel course-sandbox]
    python -m grading sandbox-install                     (the isolated grading kernel, see grading/kernel/launcher.py)
    python -m grading demo --assignment 01_attention     (write the demo class into grading/demo_class/submitted/)

The demo class is a course of its own in grading/demo_class/ (submitted/, gradebook, feedback,
grades.csv); a real class in grading/submitted/ is graded as it is and nothing there is ever
deleted or rewritten.
    python -m grading bundle [--out grading/bundle]      (what students of a graded class receive: no solutions)
    python -m grading report [--threshold 50] [--roster grading/roster.csv] [--lms-ids nbgrader]
                                                         (class report, LMS files, similarity; grading/report.py)
    python -m grading site [--variant both] [--lessons 01,02]  (the rendered course: grading/site.py)
    python -m grading collect --lms canvas|moodle DOWNLOAD [--assignment 01_attention] [--roster grading/roster.csv]
                                                         (an LMS's submissions download into grading/submitted/:
                                                          grading/collect.py)
"""
from __future__ import annotations

import argparse
import os
import sys

import grading

# before nbformat is imported (grading.demo imports it)
grading.without_iri_grammar()
grading.collect_less()
from grading import demo, pipeline, preflight  # noqa: E402
from grading.kernel import launcher  # noqa: E402


class cluster_env:  # noqa: N801 - the names grading/cluster.py reads, without importing Dask for every command
    SCHEDULER_ENV = "COURSE_DASK_SCHEDULER"
    TLS_ENV = {"ca": "COURSE_DASK_TLS_CA_FILE", "cert": "COURSE_DASK_TLS_CERT", "key": "COURSE_DASK_TLS_KEY"}
    INSECURE_ENV = "COURSE_DASK_INSECURE"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["site"]:  # its own options (grading/site.py)
        from grading import site

        return site.main(argv[1:])
    if argv[:1] == ["collect"]:  # its own options (grading/collect.py)
        from grading import collect

        return collect.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m grading", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="release, autograde, feedback and CSV for a class (the demo class by default)")
    g.add_argument("--assignment", action="append", help="assignment to grade (repeatable); default: all")
    g.add_argument("--workers", type=int, default=2, help="parallel autograde workers (default 2)")
    g.add_argument("--student", action="append", metavar="ID",
                   help="regrade only this student (repeatable; with --assignment: only those assignments); "
                        "grades.csv still lists the whole class")
    g.add_argument("--demo", choices=["auto", "yes", "no"], default="auto",
                   help="yes: the demo class, in its own course grading/demo_class/; no: the class in "
                        "grading/submitted/ as it is; auto: the demo class when submitted/ holds no student "
                        "folder (asks when both could be meant)")
    g.add_argument("--resume", action="store_true",
                   help="skip submissions already graded from the same files (compared by content), after an "
                        "interrupted or failed run")
    g.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="grade on the Dask cluster of this running scheduler (e.g. tls://lab01:8786; default: "
                        "$COURSE_DASK_SCHEDULER, else a local cluster of --workers processes); "
                        "grading/docs/scale-out.md")
    for flag, key, what in (("--tls-ca-file", "ca", "the course's CA certificate (ca.pem)"),
                            ("--tls-cert", "cert", "this machine's certificate (NAME.pem)"),
                            ("--tls-key", "key", "this machine's key (NAME-key.pem)")):
        g.add_argument(flag, metavar="PATH", dest=f"tls_{key}", default=os.environ.get(cluster_env.TLS_ENV[key]),
                       help=f"for a tls:// scheduler: {what} (default ${cluster_env.TLS_ENV[key]}); made by "
                            "`python -m grading cluster-certs`")
    g.add_argument("--insecure", action="store_true", default=os.environ.get(cluster_env.INSECURE_ENV) == "1",
                   help="accept a tcp:// scheduler address that is not loopback (unencrypted, unauthenticated: "
                        "only on a network you trust)")
    g.add_argument("--engine", choices=["auto", "dask", "processes"],
                   default=os.environ.get("COURSE_GRADING_ENGINE", "auto"),
                   help="dask: one Dask task per submission, on a LocalCluster of --workers processes or on "
                        "--scheduler; processes: worker processes forked on this machine (grading/worker.py); "
                        "auto (default; $COURSE_GRADING_ENGINE): dask, on a LocalCluster unless a scheduler is "
                        "given (processes when Dask is not installed); grading/docs/scale-out.md")
    g.add_argument("--no-feedback", action="store_true", help="skip the HTML feedback")
    g.add_argument("--no-second-pass", action="store_true",
                   help="do not re-grade timeouts and ungraded submissions alone with more time")
    g.add_argument("--kernel", default=os.environ.get("COURSE_KERNEL", "course-sandbox"),
                   help="grading kernel (default: course-sandbox, the isolated kernel; python3: no sandbox)")

    p = sub.add_parser("preflight", help="check the grading kernel and course_lib before grading")
    p.add_argument("--kernel", default=os.environ.get("COURSE_KERNEL", "course-sandbox"))

    sub.add_parser("sandbox-install", help="install the course-sandbox kernelspec into this environment")

    c = sub.add_parser("cluster-certs", help="make a course CA and one TLS certificate per machine for grading "
                                             "over tls:// (grading/certs.py, grading/docs/scale-out.md)")
    c.add_argument("names", nargs="+", metavar="NAME", help="a machine's host name or IP address (repeatable)")
    c.add_argument("--out", required=True, help="folder to write ca.pem, ca-key.pem, NAME.pem, NAME-key.pem into "
                                                "(an existing CA there is reused)")
    c.add_argument("--days", type=int, default=365, help="validity of the certificates (default 365)")

    d = sub.add_parser("demo", help="write the demo class's submissions (into grading/demo_class/submitted/)")
    d.add_argument("--assignment", action="append")
    d.add_argument("--out", default=None, help="submitted folder to write into (default: the demo course's)")

    b = sub.add_parser("bundle", help="build the students' bundle: release notebooks, data, course_lib "
                                      "without the unreleased solutions (grading/bundle.py)")
    b.add_argument("--out", default=None, help="folder to write (replaced); default grading/bundle")

    sub.add_parser("site", help="build the rendered course, instructor's and students' variants (grading/site.py)")
    sub.add_parser("collect", help="copy a Canvas or Moodle submissions download into grading/submitted/ "
                                   "(grading/collect.py)")

    r = sub.add_parser("report", help="rebuild the class report, the LMS files and the similarity table from the "
                                      "gradebook, without grading again (grading/report.py)")
    from grading import report
    report.add_arguments(r)

    args = parser.parse_args(argv)
    try:
        if args.command == "bundle":
            from grading import bundle

            pipeline.generate_assignments(bundle.assignments())
            return bundle.main(["--out", args.out] if args.out else [])
        if args.command == "report":
            return report.run(args)
        if args.command == "cluster-certs":
            from grading import certs

            return certs.main(args)
        if args.command == "grade":
            if args.workers < 1:
                parser.error(f"--workers must be at least 1, got {args.workers}")
            os.environ["COURSE_KERNEL"] = args.kernel
            scheduler = args.scheduler or os.environ.get(cluster_env.SCHEDULER_ENV)
            for key, value in (("ca", args.tls_ca), ("cert", args.tls_cert), ("key", args.tls_key)):
                if value:
                    os.environ[cluster_env.TLS_ENV[key]] = os.path.abspath(value)
            if args.insecure:
                os.environ[cluster_env.INSECURE_ENV] = "1"
            if scheduler:  # before anything is graded: a tcp:// address off loopback, or tls:// without files
                from grading import cluster

                try:
                    cluster.check_address(scheduler, insecure=args.insecure)
                except cluster.ClusterError as err:
                    print(f"error: {err}", file=sys.stderr)
                    return 2
            opts = pipeline.Options(
                assignments=args.assignment or preflight.list_assignments(), workers=args.workers,
                demo=args.demo, resume=args.resume, feedback=not args.no_feedback, kernel=args.kernel,
                second_pass=not args.no_second_pass, listed=bool(args.assignment), students=args.student,
                scheduler=args.scheduler, engine=args.engine)
            try:
                opts.engine = pipeline.engine_for(args.engine, args.scheduler or os.environ.get("COURSE_DASK_SCHEDULER"))
            except ValueError as err:
                parser.error(str(err))
            return pipeline.grade(opts)
        if args.command == "preflight":
            if args.kernel == launcher.KERNEL_NAME:
                launcher.install_kernelspec()
                ok, why = launcher.bwrap_works()
                print(f"sandbox: {'bwrap isolation' if ok else 'resource limits only: ' + why}")
            python = preflight.check_kernel(args.kernel)
            status = preflight.check_course_lib_in_kernel(args.kernel)
            print(f"kernel {args.kernel!r} ({python}): {status}")
            return 0
        if args.command == "sandbox-install":
            print(launcher.install_kernelspec())
            return 0
        if args.command == "demo":
            assignments = args.assignment or demo.assignments_with_demo()
            out = args.out or os.path.join(pipeline.DEMO_ROOT, "submitted")
            for a in assignments:
                for path in demo.generate(a, out):
                    print(path)
            return 0
    except (preflight.PreflightError, pipeline.GradingError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
