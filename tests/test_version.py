"""The package's version: one number, in setup.cfg and in `keras_transformer.__version__`."""

import configparser
import os
import re

import keras_transformer
from tests.conftest import ROOT


def test_the_package_version_is_setup_cfgs_and_the_changelogs_newest_release():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    assert keras_transformer.__version__ == parser["metadata"]["version"]
    changelog = open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8").read()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d\d-\d\d$", changelog, re.M)
    assert released and released[0] == keras_transformer.__version__
