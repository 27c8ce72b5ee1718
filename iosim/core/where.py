"""Row filters a user types (`--holdout-where 'seqlen_q>=8192 and causal'`), read by a small
grammar and never evaluated as code.

    expr   := expr (and | or | & | |) expr  |  not expr  |  ( expr )  |  comparison  |  column
    comparison := operand (== | != | < | <= | > | >= | in | not in) operand ...   (chains allowed)
    operand    := column name | number | 'string' | True | False | [literal, ...]

Python's parser builds the tree (`ast.parse` evaluates nothing); every node outside the grammar,
and every name that is not a column, is refused in one line.
"""

from __future__ import annotations

import ast
import operator

import numpy as np
import pandas as pd

from iosim.core.hardware import InputError

COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge}
ALLOWED = "column comparisons joined by and/or/not, e.g. 'seqlen_q>=8192 and head_dim==128'"


def _bad(text: str, why: str) -> InputError:
    return InputError(f"--holdout-where '{text}': {why} (allowed: {ALLOWED})")


def select(df: pd.DataFrame, text: str) -> pd.Series:
    """A boolean Series over df's rows for the filter `text`."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise _bad(text, "not a filter expression") from None

    def literal(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = literal(node.operand)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return -v
        if isinstance(node, (ast.List, ast.Tuple)):
            return [literal(e) for e in node.elts]
        raise _bad(text, f"'{ast.unparse(node)}' is neither a column nor a literal")

    def operand(node):
        if isinstance(node, ast.Name):
            if node.id not in df.columns:
                raise _bad(text, f"unknown column '{node.id}'")
            return df[node.id]
        return literal(node)

    def truth(node) -> pd.Series:
        if isinstance(node, ast.BoolOp):
            parts = [truth(v) for v in node.values]
            op = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
            out = parts[0]
            for p in parts[1:]:
                out = op(out, p)
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            op = np.logical_and if isinstance(node.op, ast.BitAnd) else np.logical_or
            return op(truth(node.left), truth(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert)):
            return ~truth(node.operand)
        if isinstance(node, ast.Compare):
            left, out = operand(node.left), pd.Series(True, index=df.index)
            for op, right_node in zip(node.ops, node.comparators):
                right = operand(right_node)
                if isinstance(op, (ast.In, ast.NotIn)):
                    if not isinstance(right, list) or not isinstance(left, pd.Series):
                        raise _bad(text, "'in' needs a column on the left and a [list] on the right")
                    hit = left.isin(right)
                    out &= ~hit if isinstance(op, ast.NotIn) else hit
                elif type(op) in COMPARE:
                    try:
                        out &= pd.Series(COMPARE[type(op)](left, right), index=df.index).astype(bool)
                    except TypeError as e:
                        raise _bad(text, str(e).splitlines()[0]) from None
                else:
                    raise _bad(text, f"operator '{type(op).__name__}' is not allowed")
                left = right
            return out
        if isinstance(node, ast.Name):  # a boolean column alone: `causal`
            col = operand(node)
            if col.dtype != bool:
                raise _bad(text, f"column '{node.id}' alone is not true/false; compare it")
            return col
        raise _bad(text, f"'{ast.unparse(node)}' is not allowed")

    return pd.Series(truth(tree), index=df.index).astype(bool)
