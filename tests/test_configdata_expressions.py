"""spiff++ expressions in ConfigData: upstream's results for what it supports, refusal by name for the rest.

Expectations come from ocm-controller v0.32.0 running spiff v1.7.0-beta-7 (the upstream-v1
fixture's probes P01-P04, P09, P14, P16, computed by upstream's code) and from spiff's own
sources (dynaml/dynaml.peg, dynaml/*.go, yaml/interpolation.go and its tests).
"""

from __future__ import annotations

import pytest
from test_configdata_configure import BACKEND

from function.configdata.configure import configure, merged_values, plan_configuration
from function.configdata.expressions import classify
from function.configdata.model import parse_configdata
from function.errors import InvalidConfigData, InvalidValues, UnsupportedRule


def cd(body: str):
    return parse_configdata("apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\n" + body)


@pytest.mark.parametrize(
    "text, expected",
    [
        # spiff yaml/interpolation_test.go "Convert String" (StringToExpression)
        ("test", "test"),
        ("test((", "test(("),
        ("((test)", "((test)"),
        ('xx((tes"t))', 'xx((tes"t))'),
        ("start (( a + b )) end", '(( "start " a + b " end" ))'),
        ("start (( a + b ))", '(( "start " a + b ))'),
        ("(( a + b )) end", '(( a + b " end" ))'),
        (" (( a + b )) ", '(( " " a + b " " ))'),
        ("start (( a )) middle (( b )) end", '(( "start " a " middle " b " end" ))'),
        ("a start ((( a ))) end", '(( "a start (" a ") end" ))'),
        ("a start (( ( b ( a )) )) end", '(( "a start " ( b ( a )) " end" ))'),
        ('b start (( "))" b )) end', '(( "b start " "))" b " end" ))'),
        ('c start (( "a(( x ))" b )) end', '(( "c start " "a(( x ))" b " end" ))'),
        ("a (( b )) start ((! a )) end", '(( "a " b " start ((! a )) end" ))'),
    ],
)
def test_interpolation_is_spiffs(text, expected):
    kind, out = classify(text)
    got = f"(( {out} ))" if kind == "expr" else text
    assert got == expected


def test_escapes_are_spiffs():
    assert classify("b start ((! a )) end") == ("literal", "b start (( a )) end")
    assert classify("((! foo ))") == ("literal", "(( foo ))")
    assert classify("(( a )):(( b ))") == (
        "expr",
        " a )):(( b ",
    )  # one expression, as EmbeddedDynaml takes it


@pytest.mark.parametrize(
    "expr, fragment",
    [
        ("(( merge(defaults, values) ))", "'merge' is not supported"),
        ("(( join(a, b) ))", "function calls (join(…)) are not supported"),
        ("(( !a ))", "negation (!) is not supported"),
        ("(( a == b ))", "comparisons (==) are not supported"),
        ("(( a ? b : c ))", "conditional expressions"),
        ("(( a -or b ))", "the logical operator -or"),
        ("(( a // b ))", "'//' (valid-or)"),
        ("(( [a, b] ))", "list literals"),
        ("(( { x = a } ))", "map literals"),
        ("(( $a ))", "symbols"),
        ("(( |x| -> x ))", "lambda"),
        ("(( lambda |x| -> x ))", "lambda"),
        ("(( map[list|x|->x] ))", "map[…]"),
        ("(( tag::a ))", "tagged references"),
        ("(( a[b] ))", "dynamic indexes"),
        ("(( ~~ ))", "'~~' (undefined)"),
        ("(( &temporary(a) ))", "marker"),
        ('(( "10.0.0.1" + 1 ))', "IP address / CIDR arithmetic"),
        ("(( _.a ))", "special reference"),
        ("(( (a = 1) a ))", "scopes"),
    ],
)
def test_other_spiff_expressions_are_refused_by_name(expr, fragment):
    c = cd(
        "configuration:\n  defaults: {a: 1, b: 2, c: 3}\n  rules:\n"
        f"  - {{value: '{expr}', file: a.yaml, path: x}}\n"
    )
    with pytest.raises(UnsupportedRule) as e:
        plan_configuration(c, {})
    assert "not supported" in str(e.value) and "configuration.rules[0].value (file a.yaml)" in str(
        e.value
    )
    assert fragment in str(e.value)


@pytest.mark.parametrize(
    "value, values, expected",
    [
        ("tcp://(( host )):6379", {"host": "cache.example"}, "tcp://cache.example:6379"),  # P01
        (
            "tcp://(( host )):(( port ))",
            {"host": "cache.example"},
            "tcp://cache.example:6379",
        ),  # P01
        (
            '(( "tcp://" host ":" port ))',
            {"host": "cache.example"},
            "tcp://cache.example:6379",
        ),  # P01
        ("(( replicas + 1 ))", {"replicas": 3}, 4),  # P02
        ("(( replicas * 2 ))", {"replicas": 3}, 6),  # P02
        ('(( missing || "fallback" ))', {}, "fallback"),  # P03
        ('(( color || "blue" ))', {"color": "red"}, "red"),  # P03
        ("(( missing || ~ ))", {}, None),  # P03
        # dynaml/division.go, modulo.go (Go: truncation, remainder has the dividend's sign),
        # addition.go (NumberOperands: int with float is float), concatenation.go (ints and bools stringify)
        ("(( 7 / 2 ))", {}, 3),
        ("(( -7 / 2 ))", {}, -3),
        ("(( -7 % 3 ))", {}, -1),
        ("(( 1 + 0.5 ))", {}, 1.5),
        ('(( port "/" flag ))', {"flag": True}, "6379/true"),
        ("(( replicas - 1 ))", {"replicas": 3}, 2),
        (
            "(( replicas-1 ))",
            {"replicas-1": "key"},
            "key",
        ),  # '-' without blanks is part of a key (Key rule)
        ("(( 1 + 2 * 3 ))", {}, 7),
        ("(( (1 + 2) * 3 ))", {}, 9),
        ("a ((! b )) c", {}, "a (( b )) c"),
        ("((! b ))", {}, "(( b ))"),
        ("(( ~ ))", {}, None),
        ("(( nil ))", {}, None),
        ("(( true ))", {}, True),
        ("(( list ))", {}, [1, 2]),
        ("(( list list ))", {}, [1, 2, 1, 2]),
    ],
)
def test_spiff_forms_give_upstreams_results(value, values, expected):
    c = cd(
        "configuration:\n  defaults: {host: redis, port: 6379, list: [1, 2]}\n  rules:\n"
        f"  - {{value: '{value}', file: a.yaml, path: x}}\n"
    )
    (sub,) = plan_configuration(c, values)
    assert sub.value == expected and type(sub.value) is type(expected)


def test_two_expressions_in_a_string_starting_and_ending_with_parens_is_a_parse_error():
    # P14: spiff takes "(( host )):(( port ))" for one expression and fails to parse it
    c = cd(
        "configuration:\n  defaults: {host: redis, port: 6379}\n  rules:\n"
        "  - {value: '(( host )):(( port ))', file: a.yaml, path: x}\n"
    )
    with pytest.raises(InvalidConfigData) as e:
        plan_configuration(c, {})
    assert "(( host )):(( port )) is not a valid spiff expression: parse error" in str(e.value)


def test_expressions_in_defaults_and_values_are_evaluated_after_the_merge():
    # P04 (expressions in defaults see the values' overrides), P09 (expressions in the values)
    c = cd(
        'configuration:\n  defaults:\n    host: redis\n    url: (( "tcp://" host ":6379" ))\n'
        "    derived: (( replicas * 10 ))\n    replicas: 1\n    color: red\n  rules:\n"
        "  - {value: (( url )), file: a.yaml, path: u}\n  - {value: (( derived )), file: a.yaml, path: d}\n"
        "  - {value: (( message )), file: a.yaml, path: m}\n  - {value: (( greeting )), file: a.yaml, path: g}\n"
    )
    values = {
        "host": "cache",
        "replicas": 2,
        "message": "(( color ))",
        "greeting": "hi (( color ))",
    }
    assert [s.value for s in plan_configuration(c, values)] == [
        "tcp://cache:6379",
        20,
        "red",
        "hi red",
    ]


def test_expressions_are_lexically_scoped_like_spiff():
    c = cd(
        "configuration:\n  defaults:\n    host: outer\n    db: {host: inner, url: (( host ))}\n    top: (( .host ))\n"
        "  rules:\n  - {value: (( db.url )), file: a.yaml, path: a}\n  - {value: (( top )), file: a.yaml, path: b}\n"
        "  - {value: {host: local, u: (( host ))}, file: a.yaml, path: c}\n"
    )
    assert [s.value for s in plan_configuration(c, {})] == [
        "inner",
        "outer",
        {"host": "local", "u": "local"},
    ]


def test_a_rules_own_field_wins_as_upstream_and_is_warned_about():
    # upstream puts each rule into the spiff document as {name: subst-<i>, file, path, value}
    # (mutation_reconcile_looper.go createSubstitutionRulesForConfigurationValues, spifftemplatedoc.go
    # addSpiffRules): a reference's first name is looked up in the rule's own map first
    # (spiff flow/environment.go FindReference), so (( name )) is "subst-0" there
    c = cd(
        "configuration:\n  defaults: {name: myapp}\n  rules:\n"
        "  - {value: (( name )), file: a.yaml, path: x}\n  - {value: (( path )), file: a.yaml, path: p.q}\n"
        "  - {value: (( .name )), file: a.yaml, path: w}\n"
    )
    subs = plan_configuration(c, {})
    assert [s.value for s in subs] == ["subst-0", "p.q", "myapp"]
    assert "(( name )) resolves to this rule's own field name ('subst-0')" in subs[0].warning
    assert (
        "the key 'name' of the values is shadowed" in subs[0].warning
        and "(( .name ))" in subs[0].warning
    )
    assert (
        subs[1].warning
        and "own field path" in subs[1].warning
        and "shadowed" not in subs[1].warning
    )
    assert subs[2].warning is None


def test_a_rule_referring_to_its_own_value_is_a_cycle():
    c = cd("configuration:\n  rules:\n  - {value: (( value )), file: a.yaml, path: x}\n")
    with pytest.raises(InvalidConfigData) as e:
        plan_configuration(c, {})
    assert "cycle" in str(e.value) and "configuration.rules[0].value" in str(e.value)


def test_or_does_not_catch_a_failure_in_a_node_it_refers_to():
    # spiff leaves both unresolved and fails (dynaml/or.go returns the unresolved expression)
    c = cd(
        "configuration:\n  defaults: {broken: (( nothere ))}\n  rules:\n"
        "  - {value: '(( broken || \"x\" ))', file: a.yaml, path: x}\n"
    )
    with pytest.raises(InvalidConfigData) as e:
        plan_configuration(c, {})
    assert "configuration.defaults.broken is (( nothere )), which fails" in str(e.value)


def test_type_errors_name_the_expression():
    c = cd(
        "configuration:\n  defaults: {v: 1.5}\n  rules:\n  - {value: 'v(( v ))', file: a.yaml, path: x}\n"
    )
    with pytest.raises(InvalidConfigData) as e:
        plan_configuration(c, {})
    assert "a string cannot be concatenated with a float" in str(e.value)
    c = cd(
        "configuration:\n  defaults: {s: x}\n  rules:\n  - {value: (( s * 2 )), file: a.yaml, path: x}\n"
    )
    with pytest.raises(InvalidConfigData) as e:
        plan_configuration(c, {})
    assert "(( s * 2 )): the first operand of multiplication must be a number" in str(e.value)


def test_unused_broken_expression_is_a_finding_not_an_error():
    # P16: upstream fails the whole configuration; here nothing written depends on it
    c = cd(
        "configuration:\n  defaults: {used: ok, unused: (( nothere ))}\n  rules:\n"
        "  - {value: (( used )), file: a.yaml, path: x}\n"
    )
    r = configure(c, {"v": "(( alsonot ))"})
    assert [s.value for s in r.substitutions] == ["ok"]
    assert [(f.code, f.path) for f in r.findings] == [
        ("UnusedExpressionFails", "configuration.defaults.unused"),
        ("UnusedExpressionFails", "values.v"),
    ]
    assert r.findings[0].message.startswith(
        "ConfigData configuration.defaults.unused: (( nothere )) refers to 'nothere', which is not in the merged values"
    )
    assert "no rule uses this value, so it is ignored" in r.findings[0].message


def test_schema_violations_can_be_reported_as_findings():
    r = configure(BACKEND, {"replicas": "three", "extra": 1}, schema_violations="Warning")
    assert [f.code for f in r.findings] == ["SchemaViolation"] * 2
    assert (
        "values: Additional properties are not allowed ('extra' was unexpected)"
        in r.findings[0].message
    )
    assert (
        "values.replicas: 'three' is not of type 'integer' (schema rule properties/replicas/type)"
        in r.findings[1].message
    )
    assert r.substitutions[0].value == "three"
    with pytest.raises(InvalidValues):
        configure(BACKEND, {"replicas": "three"})


def test_schema_sees_evaluated_values():
    c = cd(
        "configuration:\n  defaults: {replicas: 1, double: (( replicas * 2 ))}\n  schema:\n    type: object\n"
        "    properties: {double: {type: integer, maximum: 4}}\n  rules: []\n"
    )
    assert merged_values(c, {"replicas": 2})["double"] == 4
    with pytest.raises(InvalidValues) as e:
        merged_values(c, {"replicas": 3})
    assert "merged values (defaults + values).double: 6 is greater than the maximum of 4" in str(
        e.value
    )


def test_integral_floats_are_integers_as_after_upstreams_json_round_trip():
    c = cd(
        "configuration:\n  defaults: {a: 2.0, b: 2.5}\n  rules:\n  - {value: (( a )), file: f, path: x}\n"
        "  - {value: (( b )), file: f, path: w}\n  - {value: 3.0, file: f, path: z}\n"
    )
    assert [(s.value, type(s.value)) for s in plan_configuration(c, {})] == [
        (2, int),
        (2.5, float),
        (3, int),
    ]


def test_reserved_and_control_keys_are_refused():
    with pytest.raises(InvalidConfigData) as e:
        plan_configuration(cd("configuration:\n  rules: []\n"), {"ocmAdjustmentsTemplateKey": 1})
    assert "reserved" in str(e.value)
    with pytest.raises(UnsupportedRule) as e:
        plan_configuration(cd("configuration:\n  defaults: {'<<if': x}\n  rules: []\n"), {})
    assert "spiff merge and control keys" in str(e.value)


def test_list_steps_follow_spiff_index_and_name_selection():
    # yaml/find.go stepThroughList: [n] indexes (negative from the end), any other step selects by name
    c = cd(
        "configuration:\n  defaults:\n    ports: [80, 443]\n    svcs: [{name: web, port: 8080}]\n  rules:\n"
        "  - {value: '(( ports[1] ))', file: a.yaml, path: a}\n  - {value: '(( ports[-1] ))', file: a.yaml, path: b}\n"
        "  - {value: (( svcs.web.port )), file: a.yaml, path: c}\n"
    )
    assert [s.value for s in plan_configuration(c, {})] == [443, 443, 8080]
    c = cd(
        "configuration:\n  defaults: {ports: [80, 443]}\n  rules:\n  - {value: (( ports.1 )), file: a.yaml, path: a}\n"
    )
    with pytest.raises(InvalidConfigData) as e:
        plan_configuration(c, {})
    assert "refers to 'ports.1'" in str(e.value)


def test_expression_growth_is_capped():
    body = "configuration:\n  defaults:\n    d0: '" + "x" * 1000 + "'\n"
    body += "".join(f"    d{i}: (( d{i - 1} d{i - 1} ))\n" for i in range(1, 30))
    body += "  rules:\n  - {value: (( d29 )), file: a.yaml, path: x}\n"
    with pytest.raises(UnsupportedRule) as e:
        plan_configuration(cd(body), {})
    assert "build more than" in str(e.value)


def test_long_and_deep_expressions_do_not_crash():
    long = "(( " + " ".join(["a"] * 1500) + " ))"
    c = cd(
        "configuration:\n  defaults: {a: x}\n  rules:\n  - {value: '"
        + long
        + "', file: a.yaml, path: x}\n"
    )
    assert plan_configuration(c, {})[0].value == "x" * 1500
    deep = "(( " + "(" * 40 + "a" + ")" * 40 + " ))"
    c = cd(
        "configuration:\n  defaults: {a: x}\n  rules:\n  - {value: '"
        + deep
        + "', file: a.yaml, path: x}\n"
    )
    with pytest.raises(UnsupportedRule) as e:
        plan_configuration(c, {})
    assert "nests deeper" in str(e.value)
    chain = "".join(f"    k{i}: (( k{i + 1} ))\n" for i in range(100)) + "    k100: end\n"
    c = cd(
        "configuration:\n  defaults:\n"
        + chain
        + "  rules:\n  - {value: (( k0 )), file: a.yaml, path: x}\n"
    )
    with pytest.raises(InvalidConfigData) as e:
        plan_configuration(c, {})
    assert "refer to one another in a chain" in str(e.value)
