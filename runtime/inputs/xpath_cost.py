"""How much work a requester's XPath can cost on a hostile page: the degree of its cost in the page's size.

libxml2 evaluates a location step once per node of its input set, and a predicate once per node each context node's
step collected (before the sets are merged), so walks nested inside walks multiply. Counting every bound that grows
with the page (nodes, depth, siblings) as `n`, and one context node as the start:

- a step on a walking axis (descendant, descendant-or-self and `//`, ancestor, ancestor-or-self, following-sibling,
  preceding-sibling, following, preceding) collects up to n nodes per input node; child, parent, self, attribute
  collect a node's own (each node is one parent's child, so over a whole set they add up to n, not n²);
- an element's string value (`.` compared or passed to a string function, `string()` without arguments, an element
  path compared with a value) walks its subtree: n;
- a node-set holds at most n nodes after a merge, so the degree of a set is 0 (one node) or 1.

A step's work is (its input set's degree) + (1 if it walks) + (its predicates' work); an expression's, the most of
its parts'. Trawl accepts degree 2, what everyday selectors cost: CSS's descendant combinator (`div a`) and
`:nth-child` (nodes x siblings), `//td[contains(., 'Price')]`. Degree 3 is a walk inside a walk inside a walk: the
issue's `//*[count(.//*[count(.//*)>1])>1]`, `//*[count(.//*//*)>1]`, `//div/descendant::div[contains(., 'x')]`.
Measured with parsel/lxml on a page of nested `<div><a>x</a>` (depth D, 2D elements), seconds per evaluation on
this project's shared 2-core machine (its load varies: compare within a column):

    shape                                         degree   D=600    D=1200
    //*[count(.//*)>1]                              2      0.04     0.16
    //*[count(.//*[count(*)>0])>1]                  2      0.10     1.4
    //*//*                                          2      0.18     1.4
    //div//a[contains(., 'zz')]                     2      0.33     -
    //*[count(.//*[count(.//*)>1])>1]               3      0.77     5.7   (27 s at D=1,500 on 69 KB; hours on MBs)
    //*[ancestor::*[count(ancestor::*)>1]]          3      0.67     -
    //div/descendant::div[contains(., 'zz')]        3      0.56     -
    //*[count(.//*//*)>1]                           3      31       -

The model leaves out one cost of libxml2's: a walk from a set of nodes merges each node's finds into the result,
comparing each with every node already there, so `//*//*` (and CSS's `div a`) also grows faster than nodes x depth on
a page built for it. No rule that keeps the descendant combinator can refuse that; it is what everyday selectors
cost, and degree 3 is a walk more. Degree-2 work on a hostile page can still take long: the page budget
(TRAWL_SELECTORS_PAGE_SECONDS) bounds a page's items, and the reactor watchdog (runtime.bridge.watchdog) replaces a
process whose reactor stops answering. The model is an upper bound on the walks: libxml2 stops some early (an
existence test stops at its first node), never later.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_COST_DEGREE = 2
# String-building functions copy their arguments' values into one string: `concat(/,/,/,...)` with a hundred whole
# documents makes a field a hundred pages long (100 MB from 1 MB in 27 s), work the degree does not see. At most this
# many arguments of a function may be something other than a literal.
MAX_VALUE_ARGUMENTS = 4
WALKING_AXES = frozenset(
    {
        *("descendant", "descendant-or-self", "ancestor", "ancestor-or-self"),
        *("following-sibling", "preceding-sibling", "following", "preceding"),
    }
)
OWN_VALUE_AXES = frozenset({"attribute", "namespace"})  # nodes whose string value is their own, not a subtree's
NODE_TYPES = frozenset({"text", "node", "comment", "processing-instruction"})
VALUELESS_TESTS = frozenset({"text", "comment", "processing-instruction"})  # string value: the node's own text
# Functions that use their argument as a node-set (its size or existence), never its string values.
SET_FUNCTIONS = frozenset({"count", "boolean", "not", "name", "local-name", "namespace-uri"})
# Without an argument these take the context node's string value; `lang()` walks its ancestors.
CONTEXT_VALUE_FUNCTIONS = frozenset({"string", "normalize-space", "string-length", "number", "lang"})
COMPARISONS = frozenset({"=", "!=", "<", "<=", ">", ">="})
ARITHMETIC = frozenset({"+", "-", "*", "div", "mod"})


@dataclass(frozen=True)
class Cost:
    """The degree of the work to evaluate an expression from one context node; for a node-set, the degree of its size
    and whether its nodes' string values walk subtrees (elements)."""

    work: int = 0
    nodes: bool = False
    size: int = 0
    elements: bool = False

    def value_work(self) -> int:
        """The work of using the expression as a string or number: every node's string value taken."""
        return max(self.work, self.size + 1) if self.nodes and self.elements else self.work


class CostUnreadable(ValueError):
    """The tokens are not an XPath 1.0 expression this parser reads."""


class TooManyValues(CostUnreadable):
    """A string-building function given more non-literal arguments than MAX_VALUE_ARGUMENTS."""


class _Parser:
    """XPath 1.0's grammar over xpaths._tokens' tokens, computing Cost instead of a tree."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.at = tokens, 0

    def peek(self, ahead: int = 0) -> str | None:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise CostUnreadable(f"expected {expected or 'more'} at token {self.at}")
        self.at += 1
        return token

    def expression(self) -> Cost:
        return self._binary(0)

    LEVELS = (({"or"}, "bool"), ({"and"}, "bool"), ({"=", "!="}, "cmp"), ({"<", "<=", ">", ">="}, "cmp"))
    ARITHMETIC_LEVELS = ({"+", "-"}, {"*", "div", "mod"})

    def _binary(self, level: int) -> Cost:
        if level == len(self.LEVELS) + len(self.ARITHMETIC_LEVELS):
            return self._unary()
        operators = (
            self.LEVELS[level][0] if level < len(self.LEVELS) else self.ARITHMETIC_LEVELS[level - len(self.LEVELS)]
        )
        kind = self.LEVELS[level][1] if level < len(self.LEVELS) else "value"
        left = self._binary(level + 1)
        while self.peek() in operators:
            self.take()
            right = self._binary(level + 1)
            left = _combined(left, right, kind)
        return left

    def _unary(self) -> Cost:
        if self.peek() == "-":
            self.take()
            return Cost(work=self._unary().value_work())
        cost = self._path()
        while self.peek() == "|":
            self.take()
            other = self._path()
            cost = Cost(max(cost.work, other.work), True, max(cost.size, other.size), cost.elements or other.elements)
        return cost

    def _path(self) -> Cost:
        token = self.peek()
        if token in ("/", "//"):
            self.take()
            start = Cost(nodes=True, elements=True)  # the root: one node
            if token == "//":
                return self._relative(_step(start, walks=True, elements=True, predicates=[]))
            return self._relative(start) if self._starts_step() else start
        if self._starts_filter():
            cost = self._filter()
            if self.peek() in ("/", "//"):
                return self._relative(cost, continued=True)
            return cost
        return self._relative(Cost(nodes=True, elements=True))  # from the context node

    def _starts_step(self) -> bool:
        token = self.peek()
        return token is not None and (token in (".", "..", "@", "*") or _is_name(token))

    def _starts_filter(self) -> bool:
        token = self.peek()
        if token is None:
            return False
        if token == "(" or _is_literal(token):
            return True
        return _is_name(token) and self.peek(1) == "(" and token not in NODE_TYPES

    def _filter(self) -> Cost:
        cost = self._primary()
        while self.peek() == "[":
            predicate = self._predicate()
            cost = Cost(max(cost.work, cost.size + predicate.work), cost.nodes, cost.size, cost.elements)
        return cost

    def _primary(self) -> Cost:
        token = self.take()
        if token == "(":
            cost = self.expression()
            self.take(")")
            return cost
        if _is_literal(token):
            return Cost()
        self.take("(")
        arguments, values = [], 0
        while self.peek() != ")":
            values += not _is_literal(self.peek())
            arguments.append(self.expression())
            if self.peek() == ",":
                self.take()
        self.take(")")
        if values > MAX_VALUE_ARGUMENTS and token not in SET_FUNCTIONS:
            raise TooManyValues(
                f"{token}() is given {values} arguments that are not literals; at most {MAX_VALUE_ARGUMENTS}, since "
                "each may copy a whole page into the field"
            )
        return _function(token, arguments)

    def _relative(self, cost: Cost, *, continued: bool = False) -> Cost:
        if continued:
            cost = self._separator(cost)
        cost = self._step(cost)
        while self.peek() in ("/", "//"):
            cost = self._step(self._separator(cost))
        return cost

    def _separator(self, cost: Cost) -> Cost:
        if self.take() == "//":
            return _step(cost, walks=True, elements=True, predicates=[])
        return cost

    def _step(self, input_set: Cost) -> Cost:
        token = self.take()
        if token in (".", ".."):
            return _step(input_set, walks=False, elements=True, predicates=[])
        axis = "child"
        if token == "@":
            axis, token = "attribute", self.take()
        elif self.peek() == "::":
            self.take()
            axis, token = token, self.take()
        elements = axis not in OWN_VALUE_AXES
        if token in NODE_TYPES and self.peek() == "(":
            self.take()
            if self.peek() != ")":
                self.take()  # processing-instruction('name')
            self.take(")")
            elements = elements and token not in VALUELESS_TESTS
        elif token != "*" and not _is_name(token):
            raise CostUnreadable(f"not a node test: {token!r}")
        predicates = []
        while self.peek() == "[":
            predicates.append(self._predicate())
        return _step(input_set, walks=axis in WALKING_AXES, elements=elements, predicates=predicates)

    def _predicate(self) -> Cost:
        self.take("[")
        cost = self.expression()
        self.take("]")
        return cost


def _is_literal(token: str) -> bool:
    """A string or a number (`.5` is one, `.` and `..` are steps)."""
    return token[0] in "'\"" or token[0].isdigit() or (token[0] == "." and token[1:2].isdigit())


def _is_name(token: str) -> bool:
    return token[0].isalpha() or token[0] == "_"


def _step(input_set: Cost, *, walks: bool, elements: bool, predicates: list[Cost]) -> Cost:
    """A location step from every node of `input_set`, its predicates tested on every node each one collected."""
    collected = input_set.size + (1 if walks else 0)
    tested = max((predicate.work for predicate in predicates), default=0)
    work = max(input_set.work, collected + tested)
    return Cost(work=work, nodes=True, size=min(1, collected), elements=elements)


def _combined(left: Cost, right: Cost, kind: str) -> Cost:
    if kind == "bool":  # a node-set as a boolean: its existence
        return Cost(work=max(left.work, right.work))
    work = max(left.value_work(), right.value_work())
    if kind == "cmp" and left.nodes and right.nodes:  # every value of one set against every value of the other
        work = max(work, left.size + right.size)
    return Cost(work=work)


def _function(name: str, arguments: list[Cost]) -> Cost:
    if name in SET_FUNCTIONS:
        return Cost(work=max((argument.work for argument in arguments), default=0))
    work = max((argument.value_work() for argument in arguments), default=0)
    if name in CONTEXT_VALUE_FUNCTIONS and (not arguments or name == "lang"):
        work = max(work, 1)
    if name == "id":  # the elements with those ids
        return Cost(work=work, nodes=True, size=1, elements=True)
    return Cost(work=work)


def cost_degree(tokens: list[str]) -> int:
    """The degree of the expression's work in the page's size, from one context node. CostUnreadable if the tokens
    are not one XPath 1.0 expression."""
    parser = _Parser(tokens)
    cost = parser.expression()
    if parser.peek() is not None:
        raise CostUnreadable(f"unexpected {parser.peek()!r} at token {parser.at}")
    return cost.work
