"""The ConfigData engine: localization and configuration of a deployable, without I/O.

Flow: :mod:`.model` parses the file; :mod:`.localize` and :mod:`.configure` turn rules into
:class:`.substitution.Substitution` s (:mod:`.engine` ``plan``), spiff expressions evaluated by
:mod:`.expressions` and what does not fail reported as :mod:`.findings`; :mod:`.substitution`
pins each to one document; appliers write them: :mod:`.yamlfile` (round-trip text, the CLI),
:mod:`.helm` (HelmRelease values), :mod:`.kustomize` (Flux patches). :mod:`.deploy`
``mutate`` is the composition core's single entry point. Paths: :mod:`.paths`;
image references: :mod:`function.ocm.imageref`. The supported subset is in docs/configdata.md.
"""
