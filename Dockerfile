# relaybot in a container (README "Running as a service").
#
#   docker build -t relaybot .
#   cp config/telegram.yaml relaybot.yaml   # edit allowed_users; server.listen: 0.0.0.0:9464
#   docker run -d --name relaybot --restart unless-stopped --stop-timeout 45 \
#       -v relaybot-data:/data -v "$PWD/relaybot.yaml:/config/relaybot.yaml:ro" \
#       -e OPENAI_API_KEY -e TELEGRAM_BOT_TOKEN -p 127.0.0.1:9464:9464 relaybot
#   docker kill --signal HUP relaybot   # the config file is read again
#
# or `docker compose up -d` with compose.yaml. A relative storage.path (the default,
# relaybot.db) lands in /data, the volume (STATE_DIRECTORY); set server.listen: 0.0.0.0:9464 so
# the port can be published (the health check asks 127.0.0.1). --stop-timeout 45: running
# answers get 30 s after SIGTERM (docker stop's default of 10 s would kill them).

FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY orchestrator orchestrator
COPY channels channels
COPY providers providers
COPY config config
RUN pip install --no-cache-dir --no-compile --root-user-action=ignore --prefix=/install .

FROM python:3.12-slim
COPY --from=build /install /usr/local
RUN useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin relaybot \
    && mkdir -p /data /config \
    && chown relaybot:relaybot /data \
    && chmod 0700 /data
ENV STATE_DIRECTORY=/data \
    XDG_DATA_HOME=/data \
    PYTHONUNBUFFERED=1
USER relaybot
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9464
STOPSIGNAL SIGTERM
# /healthz answers 200 while every channel and provider is ok, 503 otherwise.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=4)"]
ENTRYPOINT ["relaybot"]
CMD ["run", "--config", "/config/relaybot.yaml", "--log-format", "json"]
