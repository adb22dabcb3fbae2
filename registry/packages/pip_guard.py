"""pip, refusing every requirement with a direct URL that its resolver meets: run by a package's environment's own
Python as `python -c <this file's source> install ...` (registry.packages.envs).

`--only-binary :all:` keeps pip from building a named dependency from its sdist, but not a direct URL reference
(`x @ file:///src`, `x @ https://host/x.tar.gz`) in the Requires-Dist of the wheel or of any wheel it pulls in: pip
fetches such a source tree and runs its build backend (any code) to learn its metadata, before anything could be
checked from outside, `pip install --dry-run --report` included. So the check is inside the resolver: a requirement
that carries a link and was not given on the command line (the uploaded wheel is) stops the install with an error
naming it, before it is fetched. A pip without the hook this patches refuses to install at all: never unchecked.
"""

import sys

HOOK = "_make_requirements_from_install_req"
REFUSED = "Trawl refuses direct URL requirements"


def main() -> int:
    from pip._internal.exceptions import InstallationError
    from pip._internal.resolution.resolvelib import factory

    original = getattr(factory.Factory, HOOK, None)
    if original is None:
        import pip

        print(f"ERROR: {REFUSED}, and pip {pip.__version__} has no {HOOK} to check them with", file=sys.stderr)
        return 3

    def guarded(self, ireq, requested_extras):
        if ireq.link is not None and not ireq.user_supplied:
            parent = getattr(ireq.comes_from, "name", None) or str(ireq.comes_from or "a dependency")
            raise InstallationError(
                f"{REFUSED}: {parent} requires {str(ireq.req or ireq.link)!r}, a direct URL reference, which pip "
                "would fetch and build from source on this worker. Require it by name and version, from a wheel"
            )
        return original(self, ireq, requested_extras)

    setattr(factory.Factory, HOOK, guarded)
    from pip._internal.cli.main import main as pip_main

    return pip_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
