"""Limit/offset pagination: ``?limit=&offset=``, answers ``{count, next, previous, results}``."""

from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500
