/* services.c — see services.h. A service that fails to start is an error
 * when the worker could not do what it was asked without it; --reload's
 * watch is a development aid, so it only warns. */
#include "services.h"

#include <errno.h>
#include <string.h>

#include "../base/log.h"
#include "../base/options.h"
#include "access_log.h"

int services_start(struct services *s, struct loop *l, const struct services_config *cfg)
{
    const struct options *opt = l->opt;
    *s = (struct services){.reload = {.fd = -1}};
    if (replacement_start(&s->replacement, l, cfg->owner) != 0 ||
        stats_report_start(&s->report, l, cfg->stats, opt->stats, cfg->stats_path, cfg->supervisor,
                           opt->stats_window_s) != 0 ||
        metrics_service_start(&s->metrics, l, cfg->stats) != 0 ||
        (opt->access_log && access_log_attach(l) != 0)) {
        log_error("cannot start the worker's services: %s", strerror(errno));
        return -1;
    }
    if (opt->app_timeout_ms && dispatch_threads(&l->disp)) {
        if (watchdog_start(&s->watchdog, l, cfg->stats, cfg->owner) != 0) {
            log_error("--app-timeout: cannot start the watchdog: %s", strerror(errno));
            watchdog_stop(&s->watchdog);
            return -1;
        }
        s->watching = true;
    }
    if (opt->threads_auto && dispatch_threads(&l->disp) && cfg->pool) {
        if (sizing_start(&s->sizing, l, cfg->stats, cfg->pool, cfg->pool_started, cfg->gil) != 0) {
            log_error("--blocking-threads auto: cannot start: %s", strerror(errno));
            sizing_stop(&s->sizing);
            return -1;
        }
        s->sizing_on = true;
        s->sizing.owner = cfg->owner;
    }
    if (opt->reload) {
        if (devreload_start(&s->reload, l, cfg->reload_dirs, cfg->supervisor, cfg->owner) == 0)
            s->reloading = true;
        else
            log_warn("--reload: cannot watch the app's files: %s", strerror(errno));
    }
    return 0;
}

void services_serving(struct services *s)
{
    stats_report_serving(&s->report);
}

void services_stop(struct services *s)
{
    if (s->watching)
        watchdog_stop(&s->watchdog);
    if (s->reloading)
        devreload_stop(&s->reload);
    if (s->sizing_on)
        sizing_stop(&s->sizing);
    s->watching = s->reloading = s->sizing_on = false;
}
