"""Limit/offset pagination: ``?limit=&offset=``, answers ``{count, next, previous, results}``."""

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

MAX_OFFSET = 100_000_000  # past it a database offset overflows (a 400, not a 500)


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500

    def get_offset(self, request: Request) -> int:
        offset = super().get_offset(request)
        if offset > MAX_OFFSET:
            raise ValidationError({self.offset_query_param: [f"At most {MAX_OFFSET}."]})
        return offset
