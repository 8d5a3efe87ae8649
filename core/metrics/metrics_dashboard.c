/* metrics_dashboard.c — core/metrics/dashboard.html, built into the binary so the
 * dashboard needs no file at run time (the Makefile makes this object depend
 * on the page). The path is relative to where make runs the compiler. */
#ifndef CSERVE_DASHBOARD
#define CSERVE_DASHBOARD "core/metrics/dashboard.html"
#endif

__asm__(".section .rodata\n"
        ".global cserve_dashboard_html\n"
        ".type cserve_dashboard_html, @object\n"
        "cserve_dashboard_html:\n"
        ".incbin \"" CSERVE_DASHBOARD "\"\n"
        "cserve_dashboard_html_end:\n"
        ".byte 0\n"
        ".balign 4\n"
        ".global cserve_dashboard_html_len\n"
        ".type cserve_dashboard_html_len, @object\n"
        "cserve_dashboard_html_len:\n"
        ".long cserve_dashboard_html_end - cserve_dashboard_html\n"
        ".previous\n");
