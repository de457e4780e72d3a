"""Checks across fields run beside the field problems, so one pass lists every problem.

pydantic runs a model's `model_validator(mode="after")` only when every field of the model is
valid, and stops at the first that fails: a timeout above its interval went unseen while any
other setting was wrong. A `CrossChecked` model runs each of its after-validators itself, on
the fields that are valid, and lists every one that fails beside the field problems. A check
that reads an invalid field is skipped: it cannot be judged until that field is fixed.
"""

from functools import cache
from typing import Annotated, Any, get_args

from pydantic import (
    BaseModel,
    ModelWrapValidatorHandler,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

_KNOWN_ERRORS = frozenset(get_args(ErrorType))


class CrossChecked(BaseModel):
    """A model whose after-validators all run, even beside invalid fields."""

    @model_validator(mode="wrap")
    @classmethod
    def every_cross_problem(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        """Field problems and every failing cross-field check, in one ValidationError."""
        try:
            model = handler(data)
        except ValidationError as exc:
            if not isinstance(data, dict):
                raise
            bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
            more = _cross_problems(_partial(cls, data, bad), data)
            if not more:
                raise
            raise _joined(exc, more) from None
        problems = _cross_problems(model, data)
        if problems:
            raise ValidationError.from_exception_data(cls.__name__, problems)
        return model


def _partial(cls: type[BaseModel], data: dict[str, Any], bad: set[str | int]) -> BaseModel:
    """`cls` built from its valid fields only: reading an invalid one raises AttributeError."""
    given = cls.model_fields.keys() & data.keys()
    values = {}
    for name in given - bad:
        try:
            values[name] = _adapter(cls, name).validate_python(data[name])
        except ValidationError:
            continue
    partial = cls.model_construct(**values)
    for name in given - values.keys():  # not its default: the value given is invalid
        partial.__dict__.pop(name, None)
    return partial


@cache
def _adapter(cls: type[BaseModel], name: str) -> TypeAdapter[Any]:
    field = cls.model_fields[name]
    annotation: Any = field.annotation
    for constraint in field.metadata:  # gt=0, a Duration's parser, ...
        annotation = Annotated[annotation, constraint]
    return TypeAdapter(annotation)


def _cross_problems(model: BaseModel, data: Any) -> list[InitErrorDetails]:
    """A `value_error` for each after-validator of `model` that fails on it."""
    problems = []
    validators = type(model).__pydantic_decorators__.model_validators.values()
    for validator in validators:
        if validator.info.mode != "after":
            continue
        try:
            validator.func(model)
        except AttributeError:  # it reads an invalid field: judged once that is fixed
            continue
        except (ValueError, AssertionError) as exc:
            problems.append(
                InitErrorDetails(type="value_error", loc=(), input=data, ctx={"error": exc})
            )
    return problems


def _joined(exc: ValidationError, more: list[InitErrorDetails]) -> ValidationError:
    details = []
    for error in exc.errors():
        if error["type"] in _KNOWN_ERRORS:
            detail = InitErrorDetails(type=error["type"], loc=error["loc"], input=error["input"])
            if "ctx" in error:
                detail["ctx"] = error["ctx"]
        else:  # ours (e.g. `duration`): carried with its words
            kind = PydanticCustomError(error["type"], error["msg"])
            detail = InitErrorDetails(type=kind, loc=error["loc"], input=error["input"])
        details.append(detail)
    return ValidationError.from_exception_data(exc.title, [*details, *more])
