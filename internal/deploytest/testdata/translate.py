"""Translates template.yaml as CloudFormation does before it creates anything.

Usage: python3 translate.py ROOT < shapes.json > translated.json

shapes.json maps a shape's name to its parameter values (those not given
take their defaults). For each shape this reads ROOT/template.yaml with
cfn-lint's decoder (the short forms, !Ref and the rest, as CloudFormation
reads them), expands its Fn::ForEach loops as the AWS::LanguageExtensions
transform does, first, as CloudFormation runs it before the SAM transform
(cfn-lint's own expander of that transform), puts ROOT/openapi.yaml where
the Api's DefinitionBody includes it (what the AWS::Include transform
does), gives each function the S3
address `sam package` would, and runs the AWS::Serverless-2016-10-31
transform: the SAM translator that cfn-lint ships (samtranslator), with
the shape's parameter values and cfn-lint's copy of the managed policies'
ARNs. It prints {name: translated template}, or exits non-zero with the
translator's error.

A Fn::FindInMap whose keys Ref a parameter is resolved by the
AWS::LanguageExtensions transform with the stack's parameter values;
cfn-lint's expander, which has none, picks a key of its own. So each
shape's values (its parameters', else their defaults) are put in place
of those Refs first (bind).
"""

import copy
import json
import os
import sys

import yaml
from cfnlint.data import Serverless
from cfnlint.decode import decode_str
from cfnlint.helpers import load_resource
from cfnlint.template import Template
from cfnlint.template.transforms._language_extensions import language_extension
from samtranslator.parser import parser
from samtranslator.translator.translator import Translator


def include(node, root):
    """Replaces every Fn::Transform AWS::Include with the file it names."""
    if isinstance(node, dict):
        t = node.get("Fn::Transform")
        if len(node) == 1 and isinstance(t, dict) and t.get("Name") == "AWS::Include":
            with open(os.path.join(root, t["Parameters"]["Location"]), encoding="utf-8") as f:
                return yaml.safe_load(f)
        return {k: include(v, root) for k, v in node.items()}
    if isinstance(node, list):
        return [include(v, root) for v in node]
    return node


def language_extensions(source):
    """Expands Fn::ForEach (and resolves what the transform resolves) when
    Transform lists AWS::LanguageExtensions before the SAM transform, and
    takes the transform out of the list, as CloudFormation has run it."""
    transforms = source.get("Transform", [])
    if isinstance(transforms, str):
        transforms = [transforms]
    if "AWS::LanguageExtensions" not in transforms:
        return source
    if transforms.index("AWS::LanguageExtensions") > transforms.index("AWS::Serverless-2016-10-31"):
        sys.exit("template.yaml: AWS::LanguageExtensions must come before AWS::Serverless-2016-10-31")
    # cfn-lint's Template reorders the arguments of Fn::Equals as it reads
    # them; the transform walks the template as written.
    cfn = Template("template.yaml", copy.deepcopy(source), ["us-east-1"])
    cfn.template = source
    problems, expanded = language_extension(cfn)
    if problems:
        sys.exit("template.yaml: the AWS::LanguageExtensions transform: %s" % problems)
    expanded["Transform"] = [t for t in transforms if t != "AWS::LanguageExtensions"]
    return expanded


def bind(node, values):
    """Puts the parameters' values in place of a Ref to one inside a
    Fn::FindInMap, as the AWS::LanguageExtensions transform resolves it."""
    if isinstance(node, dict):
        if len(node) == 1 and isinstance(node.get("Fn::FindInMap"), list):
            return {"Fn::FindInMap": [
                values[a["Ref"]] if isinstance(a, dict) and len(a) == 1 and a.get("Ref") in values else bind(a, values)
                for a in node["Fn::FindInMap"]
            ]}
        return {k: bind(v, values) for k, v in node.items()}
    if isinstance(node, list):
        return [bind(v, values) for v in node]
    return node


def values_of(source, params):
    """The shape's parameter values: those given, else the defaults (plain
    parameters only; a list's value is not a map's key)."""
    values = {}
    for name, p in source.get("Parameters", {}).items():
        if "List" in str(p.get("Type", "")):
            continue
        v = params.get(name, p.get("Default"))
        if v is not None:
            values[name] = str(v)
    return values


def main():
    root = sys.argv[1]
    shapes = json.load(sys.stdin)
    with open(os.path.join(root, "template.yaml"), encoding="utf-8") as f:
        source, problems = decode_str(f.read())
    if problems:
        sys.exit("template.yaml: %s" % problems)
    # The decoder's nodes are dicts and strings with line numbers: plain data.
    source = json.loads(json.dumps(source))
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    policies = load_resource(Serverless, "ManagedPolicies.json")
    out = {}
    for name, params in shapes.items():
        shape = include(language_extensions(bind(copy.deepcopy(source), values_of(source, params))), root)
        for res in shape.get("Resources", {}).values():
            if res.get("Type") == "AWS::Serverless::Function":
                res.setdefault("Properties", {})["CodeUri"] = "s3://artifacts/pendinguploads.zip"
        translator = Translator(managed_policy_map=policies, sam_parser=parser.Parser())
        out[name] = translator.translate(sam_template=shape, parameter_values=dict(params))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
