# Production image: the same code runs as API (gunicorn), worker or beat, chosen by the command.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=/opt/venv \
    PATH=/opt/venv/bin:$PATH
RUN pip install --no-cache-dir uv && useradd --create-home --uid 10001 maascp
WORKDIR /app
COPY pyproject.toml uv.lock .python-version ./
RUN uv sync --frozen --no-dev --no-install-project
COPY . .
RUN MAASCP_DATA_DIR=/tmp/build MAASCP_STATIC_ROOT=/app/static python manage.py collectstatic --noinput
# the retention task's archives (docs/operations.md, "Retention and archives"): a volume there
# starts owned by the user the processes run as
RUN mkdir -p /app/var/archive && chown maascp /app/var/archive
USER maascp
EXPOSE 8000
CMD ["gunicorn", "config.wsgi", "-c", "python:config.gunicorn", "--bind", "0.0.0.0:8000", "--workers", "4", "--threads", "4"]
