# spectrn's image: the simulated Neuron vLLM server (`spectrn sim serve`, the default command) and the
# in-cluster load generator (`spectrn loadgen ...`). Small base, non-root (uid 10001), no shell needed at run
# time, works with readOnlyRootFilesystem (no bytecode written at run time).
#
#   docker build -t spectrn:0.1.0 .
#   docker run --rm -p 8000:8000 spectrn:0.1.0 sim serve --host 0.0.0.0 --port 8000 --speculative

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY manifests ./manifests
COPY prompts ./prompts
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /dist /dist
# The `sim` extra adds uvloop: faster socket writes keep hundreds of simulated streams on schedule.
RUN set -eux; \
    wheel="$(ls /dist/spectrn-*.whl)"; \
    pip install "${wheel}[sim]"; \
    rm -rf /dist; \
    useradd --uid 10001 --user-group --no-create-home --home-dir /tmp --shell /usr/sbin/nologin spectrn
USER 10001:10001
WORKDIR /tmp
EXPOSE 8000
ENTRYPOINT ["spectrn"]
CMD ["sim", "serve", "--host", "0.0.0.0", "--port", "8000"]
