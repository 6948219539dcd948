"""Expectation suites for the KB tables: what a usable concepts/names pair must satisfy.

Each expectation carries its severity twice: in `meta["severity"]`, which the summary reads, and in GE's own
`severity` field, so any GE tooling ranks failures the same way.
Distributions are reported as quantiles in summary.json, not with expect_column_quantile_values_to_be_between:
in GE 1.24 its result holds a numpy bool, which the validation results store cannot serialize (numpy 2).
"""

from __future__ import annotations

import great_expectations as gx
import great_expectations.expectations as gxe
import pandas as pd

from bioel_core.records import NAME_TYPES

CRITICAL = "critical"
WARNING = "warning"


def anchored(id_pattern: str) -> str:
    # pandas evaluates the regex with re.search; \Z (not $) also refuses a trailing newline
    return rf"^(?:{id_pattern})\Z"


def _tag(expectation: gxe.Expectation, severity: str) -> gxe.Expectation:
    expectation.meta = {**(expectation.meta or {}), "severity": severity}
    expectation.severity = severity
    return expectation


def _non_empty(column: str) -> list[gxe.Expectation]:
    return [
        _tag(gxe.ExpectColumnValuesToNotBeNull(column=column), CRITICAL),
        _tag(gxe.ExpectColumnValueLengthsToBeBetween(column=column, min_value=1), CRITICAL),
    ]


def rows_from_input(table: str, records_in: int, severity: str = CRITICAL, what: str = "records") -> gxe.Expectation:
    """A table left empty although its input had records (all dead-lettered, a reader that read nothing) is
    critical: every other check passes vacuously on an empty table. `what` the input's records are."""
    return _tag(
        gxe.ExpectTableRowCountToBeBetween(
            min_value=1 if records_in > 0 else 0,
            description=f"A non-empty input ({records_in:,} {what}) gives a non-empty {table} table.",
        ),
        severity,
    )


# of a run's input records, dead-lettered: above the first a warning (a few malformed lines happen), above the second
# critical (a reader that does not understand the file, a wrong format or id pattern)
DEAD_LETTER_WARNING_SHARE = 0.01
DEAD_LETTER_CRITICAL_SHARE = 0.5


def dead_letter_suite(records_in: int) -> gx.ExpectationSuite:
    """The dead_letter table's size against the run's input: most records dead-lettered is not a usable output,
    though every check of the tables that were written passes (a file not read to its end: `unread_files_suite`)."""

    def at_most(share: float, severity: str) -> gxe.Expectation:
        return _tag(
            gxe.ExpectTableRowCountToBeBetween(
                max_value=int(share * records_in),
                description=f"At most {share:.0%} of the {records_in:,} input records are dead-lettered.",
            ),
            severity,
        )

    return gx.ExpectationSuite(
        name="dead_letter",
        expectations=[at_most(DEAD_LETTER_WARNING_SHARE, WARNING), at_most(DEAD_LETTER_CRITICAL_SHARE, CRITICAL)],
    )


def unread_files_suite() -> gx.ExpectationSuite:
    """The run's input files (`unread_files`: column `unread`, null, or the file with where and why it was not read to
    its end): a file of another format than the one named, or one whose reader could not read past a fault (a
    truncated gzip, XML cut short, an empty file; its dead letter marked records.DeadLetter.unread) stands for records
    never counted, which the dead letters' share cannot weigh (one dead letter for a whole file). Critical: such a run
    fails unless told otherwise (fail_on none). The same check for bioel link and ingest-kb."""
    return gx.ExpectationSuite(
        name="inputs",
        expectations=[
            _tag(
                gxe.ExpectColumnValuesToBeNull(
                    column="unread",
                    description="Every input file is read to its end in the format named (listed: those that "
                    "were not, with where and why).",
                ),
                CRITICAL,
            )
        ],
    )


def unread_files(manifest: dict) -> pd.DataFrame:
    """The frame `unread_files_suite` checks, from a manifest's `inputs[].unread`."""
    return pd.DataFrame(
        {
            "unread": pd.Series(
                [f"{i['path']}: {i['unread']}" if i.get("unread") else None for i in manifest.get("inputs", [])], dtype=object
            )
        }
    )


def concepts_suite(id_pattern: str, max_names_per_concept: int, records_in: int = 0) -> gx.ExpectationSuite:
    return gx.ExpectationSuite(
        name="concepts",
        expectations=[
            rows_from_input("concepts", records_in),
            _tag(gxe.ExpectColumnValuesToNotBeNull(column="concept_id"), CRITICAL),
            _tag(gxe.ExpectColumnValuesToBeUnique(column="concept_id"), CRITICAL),
            _tag(gxe.ExpectColumnValuesToMatchRegex(column="concept_id", regex=anchored(id_pattern)), CRITICAL),
            *_non_empty("preferred_name"),
            _tag(
                gxe.ExpectColumnValuesToBeNull(
                    column="unnamed_concept_id",
                    description="Every concept has at least one name in the names table (listed: concepts without names).",
                ),
                WARNING,
            ),
            _tag(
                gxe.ExpectColumnMaxToBeBetween(
                    column="name_count",
                    max_value=max_names_per_concept,
                    description=f"No concept has more than {max_names_per_concept} names.",
                ),
                WARNING,
            ),
        ],
    )


def names_suite(id_pattern: str, max_name_length: int, records_in: int = 0) -> gx.ExpectationSuite:
    return gx.ExpectationSuite(
        name="names",
        expectations=[
            rows_from_input("names", records_in),
            _tag(gxe.ExpectColumnValuesToBeUnique(column="name_id"), CRITICAL),
            _tag(gxe.ExpectColumnValuesToNotBeNull(column="concept_id"), CRITICAL),
            _tag(gxe.ExpectColumnValuesToMatchRegex(column="concept_id", regex=anchored(id_pattern)), CRITICAL),
            _tag(
                gxe.ExpectColumnValuesToBeNull(
                    column="orphan_concept_id",
                    description="Every name's concept_id is in the concepts table (listed: ids missing from it).",
                ),
                CRITICAL,
            ),
            *_non_empty("name"),
            *_non_empty("name_norm"),
            _tag(gxe.ExpectColumnValuesToBeInSet(column="name_type", value_set=list(NAME_TYPES)), CRITICAL),
            _tag(gxe.ExpectColumnValueLengthsToBeBetween(column="name", max_value=max_name_length), WARNING),
        ],
    )
