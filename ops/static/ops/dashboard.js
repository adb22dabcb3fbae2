/* The operations dashboard: draws the numbers embedded in the page, then polls for fresh ones. Needs Chart.js. */
(function () {
  "use strict";

  const STATUS_COLOURS = { succeeded: "#198754", failed: "#dc3545", cancelled: "#fd7e14", dead: "#6c757d" };
  const PALETTE = ["#0d6efd", "#6f42c1", "#20c997", "#ffc107", "#d63384", "#0dcaf0", "#adb5bd"];

  function timeLabel(iso) {
    const date = new Date(iso);
    return date.toISOString().slice(11, 16);
  }

  // A chart of nothing but zeros says what that means, instead of leaving an empty box.
  const emptyNotice = {
    id: "emptyNotice",
    afterDraw(chart, _args, options) {
      const hasData = chart.data.datasets.some((set) => set.data.some((value) => value));
      if (hasData || !options.text) return;
      const { ctx, chartArea } = chart;
      if (!chartArea) return;
      ctx.save();
      ctx.textAlign = "center";
      ctx.fillStyle = Chart.defaults.color;
      ctx.font = "14px sans-serif";
      ctx.fillText(options.text, (chartArea.left + chartArea.right) / 2, (chartArea.top + chartArea.bottom) / 2);
      ctx.restore();
    },
  };

  function jobsConfig(data) {
    const series = data.jobs_per_minute.series;
    return {
      type: "bar",
      data: {
        labels: data.jobs_per_minute.labels.map(timeLabel),
        datasets: Object.keys(series).map((status) => ({
          label: status,
          data: series[status],
          backgroundColor: STATUS_COLOURS[status] || PALETTE[0],
        })),
      },
      options: {
        plugins: { emptyNotice: { text: "No job ended in the last hour" } },
        scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } } },
      },
    };
  }

  function pagesConfig(data) {
    const pages = data.pages_per_domain;
    return {
      type: "bar",
      data: {
        labels: pages.labels,
        datasets: [
          { label: "last hour", data: pages.last_hour, backgroundColor: PALETTE[0] },
          { label: "last 24 h", data: pages.last_day, backgroundColor: PALETTE[6] },
        ],
      },
      options: {
        indexAxis: "y",
        plugins: { emptyNotice: { text: "No pages fetched in the last 24 h" } },
        scales: { x: { beginAtZero: true, ticks: { precision: 0 } } },
      },
    };
  }

  function queuesConfig(data) {
    const depth = data.queue_depth;
    return {
      type: "line",
      data: {
        labels: depth.labels.map(timeLabel),
        datasets: Object.keys(depth.series).map((queue, index) => ({
          label: queue,
          data: depth.series[queue],
          borderColor: PALETTE[index % PALETTE.length],
          backgroundColor: PALETTE[index % PALETTE.length],
          pointRadius: 2,
          stepped: true,
        })),
      },
      options: {
        plugins: { emptyNotice: { text: "Every queue is empty" } },
        scales: { y: { beginAtZero: true, ticks: { precision: 0 } } },
      },
    };
  }

  function throttleConfig(data) {
    const throttle = data.throttle;
    return {
      type: "bar",
      data: {
        labels: throttle.labels,
        datasets: [
          { label: "running jobs, so far", data: throttle.running_wait_seconds, backgroundColor: PALETTE[3] },
          { label: "last 15 min", data: throttle.recent_wait_seconds, backgroundColor: PALETTE[1] },
        ],
      },
      options: {
        indexAxis: "y",
        plugins: { emptyNotice: { text: "No throttle waits in the last 15 min" } },
        scales: { x: { beginAtZero: true } },
      },
    };
  }

  function versionsConfig(data) {
    const rows = data.versions.flatMap((scraper) =>
      scraper.rows.map((row) => ({ ...row, label: `${scraper.scraper}/${row.version} (${row.variant})` }))
    );
    return {
      type: "bar",
      data: {
        labels: rows.map((row) => row.label),
        datasets: [
          {
            label: "success rate %",
            data: rows.map((row) => (row.success_rate === null ? null : Math.round(row.success_rate * 1000) / 10)),
            backgroundColor: STATUS_COLOURS.succeeded,
            yAxisID: "y",
          },
          {
            label: "jobs",
            data: rows.map((row) => row.jobs),
            backgroundColor: PALETTE[6],
            yAxisID: "y1",
          },
          {
            label: "median duration s",
            type: "line",
            data: rows.map((row) => row.median_duration),
            borderColor: PALETTE[1],
            backgroundColor: PALETTE[1],
            yAxisID: "y1",
          },
        ],
      },
      options: {
        plugins: { emptyNotice: { text: "No job of any version in the last 24 h" } },
        scales: {
          y: { beginAtZero: true, max: 100, position: "left", title: { display: true, text: "%" } },
          y1: { beginAtZero: true, position: "right", grid: { drawOnChartArea: false } },
        },
      },
    };
  }

  const CHARTS = {
    jobs: ["chart-jobs", jobsConfig],
    pages: ["chart-pages", pagesConfig],
    queues: ["chart-queues", queuesConfig],
    throttle: ["chart-throttle", throttleConfig],
    versions: ["chart-versions", versionsConfig],
  };

  function draw(data) {
    const charts = window.trawlCharts;
    for (const [name, [canvasId, configOf]] of Object.entries(CHARTS)) {
      const config = configOf(data);
      if (charts[name]) {
        charts[name].data = config.data;
        charts[name].update("none");
      } else {
        config.options = { ...config.options, maintainAspectRatio: false };
        charts[name] = new Chart(document.getElementById(canvasId), config);
      }
    }
    document.getElementById("ops-generated").textContent = data.generated_at;
    document.getElementById("ops-queued").textContent = data.jobs_active.queued;
    document.getElementById("ops-running").textContent = data.jobs_active.running;
  }

  function start() {
    const root = document.getElementById("ops-dashboard");
    const body = getComputedStyle(document.body);
    Chart.defaults.color = body.getPropertyValue("--body-fg").trim() || "#333";
    Chart.defaults.borderColor = body.getPropertyValue("--hairline-color").trim() || "#e8e8e8";
    Chart.defaults.animation = false;
    Chart.register(emptyNotice);
    window.trawlCharts = {};
    draw(JSON.parse(document.getElementById("ops-data").textContent));
    window.trawlDashboardReady = true;
    const every = Number(root.dataset.refreshSeconds || 30) * 1000;
    setInterval(() => {
      fetch(root.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then((response) => (response.ok ? response.json() : Promise.reject(response.status)))
        .then(draw)
        .catch((error) => console.warn("dashboard refresh failed:", error));
    }, every);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
