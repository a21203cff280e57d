"""A run's report as JUnit XML (one testcase per script) and as JSON."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from aitestbed.host.jobrun.plan import RunReport

# XML 1.0 cannot carry most control characters (a job may print anything)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: str) -> str:
    return _NOT_XML.sub("?", value)


def junit(report: RunReport) -> str:
    failures = sum(not r.ok for r in report.results)
    total = sum(r.duration_s for r in report.results)
    suite = ET.Element("testsuite", {
        "name": f"aitestbed run {report.system} on {report.cluster}",
        "tests": str(len(report.results)), "failures": str(failures), "errors": "0",
        "skipped": "0", "time": f"{total:.3f}"})
    properties = ET.SubElement(suite, "properties")
    for key in ("cluster", "system", "user"):
        ET.SubElement(properties, "property", {"name": key, "value": getattr(report, key)})
    for result in report.results:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"aitestbed.{report.system}", "name": result.script,
            "time": f"{result.duration_s:.3f}"})
        props = ET.SubElement(case, "properties")
        for key, value in [("job_id", result.job_id), ("state", result.state),
                           ("exit_code", "" if result.exit_code is None
                            else str(result.exit_code))]:
            ET.SubElement(props, "property", {"name": key, "value": value})
        if not result.ok:
            failure = ET.SubElement(case, "failure", {"message": _text(result.summary()),
                                                      "type": result.state})
            failure.text = _text(result.tail)
        ET.SubElement(case, "system-out").text = _text(result.tail)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, "unicode") + "\n"


def as_json(report: RunReport) -> str:
    return json.dumps(report.to_json(), indent=2) + "\n"
