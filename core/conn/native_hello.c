/* native_hello.c — the hello response from C, byte for byte what the default
 * Python app produces through the bridge: the loop's ceiling with no Python. */
#include <string.h>

#include "app.h"
#include "../http/httpdate.h"
#include "../python/job.h"
#include "../http/response_head.h"

void native_hello_respond(struct job *job)
{
    static const char body[] = "Hello, World!";
    static const char type[] = "Content-Type: text/plain\r\nContent-Length: 13\r\n";
    struct buffer *out = &job->out[0];
    out->len = 0;
    if (!buffer_reserve(out, 256)) {
        job->incomplete = JOB_CUT;
        job->close_after = true;
    } else {
        response_head_start(out, "200 OK", 6);
        memcpy(out->data + out->len, type, sizeof type - 1);
        out->len += sizeof type - 1;
        job_head_end(out, job);
        if (!job->is_head) {
            memcpy(out->data + out->len, body, sizeof body - 1);
            out->len += sizeof body - 1;
        }
    }
    job->status = 200;
    job->body_bytes = 13;
    job->msg = JOB_DONE;
    job->msg_buf = 0;
}
