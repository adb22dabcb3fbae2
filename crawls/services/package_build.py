"""On a crawl worker: build an uploaded version's environment and check its spider there, then record the verdict.

Worker-only (it starts the package's child process, runtime.packaged.children); the web publishes
`crawls.tasks.build_package` by name (registry.publish), and crawls.tasks runs it.
"""

from __future__ import annotations

from crawls.services.crawl_spec import package_spec_of
from registry.models import PackageStatus, ScraperVersion
from registry.packages.envs import env_of
from registry.services.packages import packages_unused, version_package_record
from runtime.packaged.children import PackageUnavailable, package_check
from runtime.settings.compose import child_pool


def version_package_build(*, version_id: int) -> str:
    """Build (or reuse) the package's environment on this machine and import the version's spider inside it, with
    the project's other spiders, recorded by name."""
    version = ScraperVersion.objects.select_related("package").filter(pk=version_id).first()
    if version is None or version.package is None:
        return "gone"
    try:
        problem, spiders = package_check(
            package=package_spec_of(version.package),
            spider=version.spider,
            settings_module=version.settings_module,
            unused=packages_unused,
            pool=child_pool(),
        )
    except PackageUnavailable as exc:
        version_package_record(version_id=version_id, status=PackageStatus.FAILED, log=f"{exc.message}\n\n{exc.log}")
        return PackageStatus.FAILED
    except Exception as exc:  # SoftTimeLimitExceeded too: a build that ends, however, never leaves it `building`
        reason = f"the build on this worker raised {exc!r}"
        version_package_record(version_id=version_id, status=PackageStatus.FAILED, log=reason)
        raise
    log = env_of(version.package.sha256).build_log()
    if problem:
        version_package_record(version_id=version_id, status=PackageStatus.FAILED, log=f"spider: {problem}\n\n{log}")
        return PackageStatus.FAILED
    version_package_record(version_id=version_id, status=PackageStatus.READY, log=log, spiders=spiders)
    return PackageStatus.READY
